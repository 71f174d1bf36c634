//! CPU discovery: which CPUs are online, how fast each is, and where each
//! figure came from. Every function takes the filesystem root so that tests
//! run against fixture directories.
//!
//! Capacity per CPU, first source that applies (issue 6):
//! 1. the configuration (`capacity` table) or `--fast CPUS`;
//! 2. `cpuN/cpu_capacity` (arm64 and hybrid x86, 1024 = the biggest core);
//! 3. `cpuN/acpi_cppc/highest_perf`;
//! 4. `cpuN/cpufreq/amd_pstate_prefcore_ranking` or `amd_pstate_highest_perf`;
//! 5. Intel hybrid PMU CPU lists `devices/cpu_core/cpus` (P cores) and
//!    `devices/cpu_atom/cpus` (E cores; scaled by their max frequency when
//!    known, else an assumed 0.6 of a P core);
//! 6. `cpuN/cpufreq/cpuinfo_max_freq`;
//! 7. an optional calibration probe ([`calibrate`]).
//!
//! A sysfs source is used only when it exists for every online CPU; among
//! those, the first that shows a difference wins, else the first that exists
//! (a symmetric machine). Capacities are normalised so the fastest CPU is 1024.
//!
//! Classes: CPUs whose capacities are within 2 % share a class; classes are
//! ordered fastest first and named `fast`, `slow` (or `fast`, `mid1`, …,
//! `slow`); class speed = capacity / 1024. Topology ids are dense (0..n) in
//! ascending Linux CPU number; [`Discovered::linux_ids`] maps them back.

use crate::AgentError;
use ampsched_model::topology::CacheSpec;
use ampsched_model::{CpuClass, CpuId, CpuInfo, CpuSet, NoiseSpec, Topology};
use std::collections::BTreeMap;
use std::path::Path;

/// Capacity of the biggest core, as in Linux.
pub const FULL_CAPACITY: f64 = 1024.0;
/// Capacities within this fraction of each other form one class.
pub const CLASS_TOLERANCE: f64 = 0.02;
/// Assumed E-core capacity relative to a P core when nothing better is known.
pub const ASSUMED_ATOM_RATIO: f64 = 0.6;
/// Slow-class speed assumed when `--fast` declares classes on a symmetric machine
/// (the emulated asymmetry of the papers: a fast core runs twice as fast).
pub const DECLARED_SLOW_RATIO: f64 = 0.5;

/// Operator overrides of discovery.
#[derive(Clone, Debug, Default)]
pub struct Overrides {
    /// Capacity per Linux CPU number (any scale; normalised).
    pub capacity: BTreeMap<u32, f64>,
    /// Linux CPUs declared fast (the rest slow).
    pub fast: Option<CpuSet>,
    /// Capacities measured by a calibration probe, per Linux CPU.
    pub calibrated: Option<BTreeMap<u32, f64>>,
}

/// One discovered CPU.
#[derive(Clone, Debug, PartialEq)]
pub struct CpuDesc {
    /// Linux CPU number.
    pub linux_id: u32,
    /// Capacity, fastest = 1024.
    pub capacity: f64,
    /// Where the capacity came from.
    pub source: String,
    /// Class index into the topology's classes.
    pub class: usize,
    /// Last-level-cache domain (topology numbering).
    pub mem_domain: u32,
    /// NUMA node.
    pub numa: u32,
}

/// The discovered machine.
#[derive(Clone, Debug)]
pub struct Discovered {
    /// CPUs in topology order.
    pub cpus: Vec<CpuDesc>,
    /// The topology handed to placers (ids 0..n).
    pub topo: Topology,
    /// Topology id → Linux CPU number.
    pub linux_ids: Vec<u32>,
    /// How the classes were decided.
    pub class_source: String,
}

impl Discovered {
    /// Convert a topology CPU set to a Linux CPU set.
    pub fn to_linux(&self, s: &CpuSet) -> CpuSet {
        CpuSet::from_cpus(s.iter().filter_map(|c| self.linux_ids.get(c.idx()).map(|l| CpuId(*l))))
    }

    /// Convert a Linux CPU set to topology ids (CPUs the topology does not know are dropped).
    pub fn from_linux(&self, s: &CpuSet) -> CpuSet {
        CpuSet::from_cpus(
            self.linux_ids.iter().enumerate().filter(|(_, l)| s.contains(CpuId(**l))).map(|(i, _)| CpuId(i as u32)),
        )
    }

    /// Topology id of a Linux CPU.
    pub fn topo_id(&self, linux: u32) -> Option<CpuId> {
        self.linux_ids.iter().position(|l| *l == linux).map(|i| CpuId(i as u32))
    }
}

fn read_trim(p: &Path) -> Option<String> {
    std::fs::read_to_string(p).ok().map(|s| s.trim().to_string())
}

fn read_f64(p: &Path) -> Option<f64> {
    read_trim(p)?.parse::<f64>().ok().filter(|x| *x > 0.0)
}

/// Online CPUs from `sys/devices/system/cpu/online` under `root`.
pub fn online_cpus(root: &Path) -> Result<CpuSet, AgentError> {
    let p = root.join("sys/devices/system/cpu/online");
    let s =
        read_trim(&p).ok_or_else(|| AgentError::new(format!("{}: cannot read the online CPU list", p.display())))?;
    let set = CpuSet::parse_list(&s).map_err(|e| AgentError::new(format!("{}: {e}", p.display())))?;
    if set.is_empty() {
        return Err(AgentError::new(format!("{}: no online CPU", p.display())));
    }
    Ok(set)
}

type Source = (&'static str, Box<dyn Fn(u32) -> Option<f64>>);

fn sysfs_sources(root: &Path) -> Vec<Source> {
    let cpu_dir = root.join("sys/devices/system/cpu");
    let dev = root.join("sys/devices");
    let d1 = cpu_dir.clone();
    let d2 = cpu_dir.clone();
    let d3 = cpu_dir.clone();
    let d4 = cpu_dir.clone();
    let d5 = cpu_dir;
    let core = read_trim(&dev.join("cpu_core/cpus")).and_then(|s| CpuSet::parse_list(&s).ok());
    let atom = read_trim(&dev.join("cpu_atom/cpus")).and_then(|s| CpuSet::parse_list(&s).ok());
    vec![
        ("cpu_capacity", Box::new(move |c| read_f64(&d1.join(format!("cpu{c}/cpu_capacity"))))),
        ("acpi_cppc/highest_perf", Box::new(move |c| read_f64(&d2.join(format!("cpu{c}/acpi_cppc/highest_perf"))))),
        (
            "amd_pstate ranking",
            Box::new(move |c| {
                read_f64(&d3.join(format!("cpu{c}/cpufreq/amd_pstate_prefcore_ranking")))
                    .or_else(|| read_f64(&d3.join(format!("cpu{c}/cpufreq/amd_pstate_highest_perf"))))
            }),
        ),
        (
            "intel hybrid cpu_core/cpu_atom",
            Box::new(move |c| {
                let (core, atom) = (core?, atom?);
                let freq = |x: u32| read_f64(&d4.join(format!("cpu{x}/cpufreq/cpuinfo_max_freq")));
                if core.contains(CpuId(c)) {
                    Some(FULL_CAPACITY)
                } else if atom.contains(CpuId(c)) {
                    let ratio = match (freq(c), core.first().and_then(|p| freq(p.0))) {
                        (Some(a), Some(p)) => (a / p).min(1.0),
                        _ => ASSUMED_ATOM_RATIO,
                    };
                    Some(FULL_CAPACITY * ratio)
                } else {
                    None
                }
            }),
        ),
        ("cpufreq/cpuinfo_max_freq", Box::new(move |c| read_f64(&d5.join(format!("cpu{c}/cpufreq/cpuinfo_max_freq"))))),
    ]
}

fn shared_first(root: &Path, cpu: u32, rel: &str) -> Option<u32> {
    let s = read_trim(&root.join(format!("sys/devices/system/cpu/cpu{cpu}/{rel}")))?;
    CpuSet::parse_list(&s).ok()?.first().map(|c| c.0)
}

/// The private level-2 cache of `cpu` in KiB from sysfs (`cache/indexN` with `level` 2 and
/// `type` Unified or Data; `size` as "2048K"), `None` where sysfs does not say.
fn l2_kb(root: &Path, cpu: u32) -> Option<u32> {
    let dir = root.join(format!("sys/devices/system/cpu/cpu{cpu}/cache"));
    (0..16).find_map(|i| {
        let ix = dir.join(format!("index{i}"));
        let level = read_trim(&ix.join("level"))?;
        let kind = read_trim(&ix.join("type")).unwrap_or_default();
        if level != "2" || kind == "Instruction" {
            return None;
        }
        let size = read_trim(&ix.join("size"))?;
        let (n, mult) = match size.strip_suffix('K') {
            Some(n) => (n, 1),
            None => (size.strip_suffix('M')?, 1024),
        };
        n.parse::<u32>().ok().filter(|k| *k > 0).map(|k| k.saturating_mul(mult))
    })
}

fn numa_node(root: &Path, cpu: u32) -> u32 {
    let dir = root.join(format!("sys/devices/system/cpu/cpu{cpu}"));
    std::fs::read_dir(dir)
        .ok()
        .and_then(|d| d.filter_map(|e| e.ok()?.file_name().to_str()?.strip_prefix("node")?.parse::<u32>().ok()).min())
        .unwrap_or(0)
}

/// Discover the machine under `root` (normally `/`).
pub fn discover(root: &Path, ov: &Overrides) -> Result<Discovered, AgentError> {
    let online = online_cpus(root)?;
    let linux: Vec<u32> = online.iter().map(|c| c.0).collect();
    for c in ov.capacity.keys().chain(ov.fast.iter().flat_map(|f| f.iter().map(|c| c.0)).collect::<Vec<_>>().iter()) {
        if !online.contains(CpuId(*c)) {
            return Err(AgentError::new(format!(
                "CPU {c} is not online (online CPUs: {}); check the capacity table or --fast",
                online.to_list()
            )));
        }
    }
    // Per CPU: (capacity, source), before normalisation.
    let mut caps: Vec<(f64, String)> =
        vec![(FULL_CAPACITY, "default (no source found: symmetric)".into()); linux.len()];
    let sources = sysfs_sources(root);
    let mut first: Option<(&str, Vec<f64>)> = None;
    let mut differing: Option<(&str, Vec<f64>)> = None;
    for (name, f) in &sources {
        let Some(v) = linux.iter().map(|c| f(*c)).collect::<Option<Vec<f64>>>() else { continue };
        if v.iter().any(|x| (x - v[0]).abs() > CLASS_TOLERANCE * v[0]) {
            differing = Some((name, v));
            break;
        }
        first.get_or_insert((name, v));
    }
    let chosen = differing.or(first);
    if let Some((name, v)) = &chosen {
        for (i, x) in v.iter().enumerate() {
            caps[i] = (*x, format!("sysfs {name}"));
        }
    }
    if let Some(cal) = &ov.calibrated {
        for (i, c) in linux.iter().enumerate() {
            if let Some(x) = cal.get(c) {
                caps[i] = (*x, "calibration probe".into());
            }
        }
    }
    let max = caps.iter().map(|c| c.0).fold(0.0, f64::max).max(1e-9);
    for c in &mut caps {
        c.0 = c.0 / max * FULL_CAPACITY;
    }
    if !ov.capacity.is_empty() {
        let cmax = ov.capacity.values().copied().fold(0.0, f64::max).max(1e-9);
        for (i, c) in linux.iter().enumerate() {
            if let Some(x) = ov.capacity.get(c) {
                caps[i] = (x / cmax * FULL_CAPACITY, "config capacity table".into());
            }
        }
    }
    // Classes.
    let mut class_of = vec![0usize; linux.len()];
    let mut class_caps: Vec<f64> = Vec::new();
    let class_source;
    if let Some(fast) = &ov.fast {
        if fast.is_empty() {
            return Err(AgentError::new("--fast names no CPU".to_string()));
        }
        let fast_mean = mean(linux.iter().zip(&caps).filter(|(l, _)| fast.contains(CpuId(**l))).map(|(_, c)| c.0));
        let slow_vals: Vec<f64> =
            linux.iter().zip(&caps).filter(|(l, _)| !fast.contains(CpuId(**l))).map(|(_, c)| c.0).collect();
        if slow_vals.is_empty() {
            class_caps.push(FULL_CAPACITY);
        } else {
            let slow_mean = mean(slow_vals.iter().copied());
            let slow = if slow_mean < fast_mean * (1.0 - CLASS_TOLERANCE) {
                slow_mean / fast_mean * FULL_CAPACITY
            } else {
                DECLARED_SLOW_RATIO * FULL_CAPACITY
            };
            class_caps = vec![FULL_CAPACITY, slow];
        }
        for (i, l) in linux.iter().enumerate() {
            let f = fast.contains(CpuId(*l));
            class_of[i] = if f { 0 } else { 1 };
            caps[i] = (
                class_caps[class_of[i]],
                format!(
                    "declared {} (--fast/config; measured {:.0} from {})",
                    if f { "fast" } else { "slow" },
                    caps[i].0,
                    caps[i].1
                ),
            );
        }
        class_source = format!("declared: fast CPUs {}", fast.to_list());
    } else {
        let mut distinct: Vec<f64> = Vec::new();
        let mut sorted: Vec<f64> = caps.iter().map(|c| c.0).collect();
        sorted.sort_by(|a, b| b.total_cmp(a));
        for x in sorted {
            if distinct.last().is_none_or(|d| (d - x) > CLASS_TOLERANCE * d) {
                distinct.push(x);
            }
        }
        for (i, c) in caps.iter().enumerate() {
            class_of[i] = distinct.iter().position(|d| (d - c.0) <= CLASS_TOLERANCE * d).unwrap_or(distinct.len() - 1);
        }
        class_caps = distinct;
        class_source = if class_caps.len() == 1 {
            "discovered: one class (symmetric machine; use --fast to declare fast CPUs)".into()
        } else {
            format!("discovered: {} classes by capacity", class_caps.len())
        };
    }
    let n = class_caps.len();
    let classes: Vec<CpuClass> = class_caps
        .iter()
        .enumerate()
        .map(|(i, c)| CpuClass {
            name: match (i, n) {
                (_, 1) => "all".into(),
                (0, _) => "fast".into(),
                (i, n) if i == n - 1 => "slow".into(),
                (i, _) => format!("mid{i}"),
            },
            speed: c / FULL_CAPACITY,
        })
        .collect();
    // Memory domains: CPUs sharing the last-level cache (index3, else index2), numbered densely.
    let mut md_ids: BTreeMap<u32, u32> = BTreeMap::new();
    let mut numa_ids: BTreeMap<u32, u32> = BTreeMap::new();
    let mut descs = Vec::new();
    let mut infos = Vec::new();
    for (i, l) in linux.iter().enumerate() {
        let node = numa_node(root, *l);
        let llc = shared_first(root, *l, "cache/index3/shared_cpu_list")
            .or_else(|| shared_first(root, *l, "cache/index2/shared_cpu_list"))
            .unwrap_or(node);
        let next = md_ids.len() as u32;
        let md = *md_ids.entry(llc).or_insert(next);
        let next = numa_ids.len() as u32;
        let numa = *numa_ids.entry(node).or_insert(next);
        descs.push(CpuDesc {
            linux_id: *l,
            capacity: caps[i].0,
            source: caps[i].1.clone(),
            class: class_of[i],
            mem_domain: md,
            numa,
        });
        infos.push(CpuInfo {
            id: CpuId(i as u32),
            class: class_of[i],
            speed: classes[class_of[i]].speed,
            mem_domain: md,
            numa,
            noise: NoiseSpec::None,
        });
    }
    // The L2 a migration leaves behind (aash's cache-hot grants compare working sets with it):
    // the smallest any CPU reports, else the model's default.
    let l2 = linux.iter().filter_map(|l| l2_kb(root, *l)).min();
    let cache = CacheSpec { l2_kb: l2.unwrap_or(CacheSpec::default().l2_kb), ..CacheSpec::default() };
    let topo = Topology::new(classes, infos, cache);
    Ok(Discovered { cpus: descs, topo, linux_ids: linux, class_source })
}

fn mean(it: impl Iterator<Item = f64>) -> f64 {
    let (s, n) = it.fold((0.0, 0usize), |(s, n), x| (s + x, n + 1));
    if n == 0 {
        0.0
    } else {
        s / n as f64
    }
}

/// Calibration probe: run the same integer loop pinned to each CPU and return
/// capacities (fastest = 1024). `rounds` × ~`ms` per CPU; the best round counts,
/// so a brief interruption does not make a core look slow. Restores this
/// thread's affinity afterwards.
pub fn calibrate(linux_cpus: &[u32], rounds: usize, ms: u64) -> Result<BTreeMap<u32, f64>, AgentError> {
    let orig = crate::actuate::get_affinity(0).map_err(|e| AgentError::new(format!("calibration: {e}")))?;
    // Size the loop once on the current CPU so one round takes about `ms`.
    let mut iters: u64 = 1 << 16;
    loop {
        let t = std::time::Instant::now();
        std::hint::black_box(spin_work(iters));
        if t.elapsed().as_secs_f64() * 1e3 >= ms as f64 / 4.0 || iters > 1 << 40 {
            break;
        }
        iters *= 2;
    }
    let mut rate = BTreeMap::new();
    let mut result = Ok(());
    for &c in linux_cpus {
        if let Err(e) = crate::actuate::set_affinity(0, &CpuSet::single(CpuId(c))) {
            result = Err(AgentError::new(format!("calibration: cannot run on CPU {c}: {e}")));
            break;
        }
        let mut best = f64::MAX;
        for _ in 0..rounds.max(1) {
            let t = std::time::Instant::now();
            std::hint::black_box(spin_work(iters));
            best = best.min(t.elapsed().as_secs_f64());
        }
        rate.insert(c, iters as f64 / best);
    }
    let _ = crate::actuate::set_affinity(0, &orig);
    result?;
    let max = rate.values().copied().fold(0.0, f64::max).max(1e-9);
    Ok(rate.into_iter().map(|(c, r)| (c, r / max * FULL_CAPACITY)).collect())
}

/// A dependent integer chain the compiler cannot shorten.
pub fn spin_work(iters: u64) -> u64 {
    let mut x: u64 = 0x9E37_79B9_7F4A_7C15;
    for i in 0..iters {
        x ^= x << 13;
        x ^= x >> 7;
        x ^= x << 17;
        x = x.wrapping_add(i);
    }
    x
}

#[cfg(test)]
mod tests {
    use super::*;
    use std::fs;

    fn fixture(online: &str, files: &[(&str, &str)]) -> tempfile::TempDir {
        let d = tempfile::tempdir().unwrap();
        let base = d.path().join("sys/devices/system/cpu");
        fs::create_dir_all(&base).unwrap();
        fs::write(base.join("online"), format!("{online}\n")).unwrap();
        for (rel, text) in files {
            let p = d.path().join(rel);
            fs::create_dir_all(p.parent().unwrap()).unwrap();
            fs::write(p, text).unwrap();
        }
        d
    }

    #[test]
    fn big_little_from_cpu_capacity() {
        // arm64 big.LITTLE: CPUs 0-1 little (446), 2-3 big (1024), shared L2 per cluster.
        let cpu = "sys/devices/system/cpu";
        let f = fixture(
            "0-3",
            &[
                (&format!("{cpu}/cpu0/cpu_capacity"), "446"),
                (&format!("{cpu}/cpu1/cpu_capacity"), "446"),
                (&format!("{cpu}/cpu2/cpu_capacity"), "1024"),
                (&format!("{cpu}/cpu3/cpu_capacity"), "1024"),
                (&format!("{cpu}/cpu0/cache/index2/shared_cpu_list"), "0-1"),
                (&format!("{cpu}/cpu1/cache/index2/shared_cpu_list"), "0-1"),
                (&format!("{cpu}/cpu2/cache/index2/shared_cpu_list"), "2-3"),
                (&format!("{cpu}/cpu3/cache/index2/shared_cpu_list"), "2-3"),
                // cpufreq exists too but cpu_capacity comes first.
                (&format!("{cpu}/cpu0/cpufreq/cpuinfo_max_freq"), "2000000"),
            ],
        );
        let d = discover(f.path(), &Overrides::default()).unwrap();
        // Classes fastest first: fast = {2,3} speed 1.0; slow = {0,1} speed 446/1024 ≈ 0.4355.
        assert_eq!(d.topo.classes.len(), 2);
        assert_eq!(d.topo.fast_cpus.to_list(), "2-3");
        assert!((d.topo.classes[1].speed - 446.0 / 1024.0).abs() < 1e-9);
        assert_eq!(d.cpus[0].source, "sysfs cpu_capacity");
        // Two LLC domains numbered in order of first appearance.
        assert_eq!(d.topo.mem_domains.len(), 2);
        assert_eq!(d.topo.mem_domains[1].to_list(), "2-3");
    }

    #[test]
    fn the_l2_size_comes_from_the_level_2_data_or_unified_cache() {
        // This machine's sysfs: index0 L1d 48K, index1 L1i 64K, index2 L2 2048K, index3 L3.
        let cpu = "sys/devices/system/cpu";
        let mut files = Vec::new();
        for c in 0..2 {
            for (i, level, kind, size) in [
                (0, "1", "Data", "48K"),
                (1, "1", "Instruction", "64K"),
                (2, "2", "Unified", "2048K"),
                (3, "3", "Unified", "491520K"),
            ] {
                let ix = format!("{cpu}/cpu{c}/cache/index{i}");
                files.push((format!("{ix}/level"), level.to_string()));
                files.push((format!("{ix}/type"), kind.to_string()));
                files.push((format!("{ix}/size"), size.to_string()));
            }
        }
        let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let f = fixture("0-1", &refs);
        assert_eq!(l2_kb(f.path(), 0), Some(2048));
        assert_eq!(discover(f.path(), &Overrides::default()).unwrap().topo.cache.l2_kb, 2048);
        // "1M" is 1024 KiB; no cache directory: the model's default.
        fs::write(f.path().join(format!("{cpu}/cpu1/cache/index2/size")), "1M\n").unwrap();
        assert_eq!(discover(f.path(), &Overrides::default()).unwrap().topo.cache.l2_kb, 1024);
        let bare = fixture("0", &[]);
        assert_eq!(discover(bare.path(), &Overrides::default()).unwrap().topo.cache.l2_kb, CacheSpec::default().l2_kb);
    }

    #[test]
    fn equal_capacity_falls_through_to_a_source_that_differs() {
        // cpu_capacity says 1024 everywhere, cppc highest_perf differs: 255 vs 170.
        let cpu = "sys/devices/system/cpu";
        let f = fixture(
            "0-1",
            &[
                (&format!("{cpu}/cpu0/cpu_capacity"), "1024"),
                (&format!("{cpu}/cpu1/cpu_capacity"), "1024"),
                (&format!("{cpu}/cpu0/acpi_cppc/highest_perf"), "255"),
                (&format!("{cpu}/cpu1/acpi_cppc/highest_perf"), "170"),
            ],
        );
        let d = discover(f.path(), &Overrides::default()).unwrap();
        // 170 / 255 × 1024 = 682.67.
        assert!((d.cpus[1].capacity - 682.666).abs() < 0.01, "{:?}", d.cpus[1]);
        assert_eq!(d.cpus[1].source, "sysfs acpi_cppc/highest_perf");
        assert_eq!(d.topo.fast_cpus.to_list(), "0");
    }

    #[test]
    fn intel_hybrid_lists_scaled_by_max_frequency() {
        // P cores 0-1 at 5.0 GHz, E cores 2-3 at 3.8 GHz → 3.8/5.0 × 1024 = 778.24.
        let cpu = "sys/devices/system/cpu";
        let mut files = vec![
            ("sys/devices/cpu_core/cpus".to_string(), "0-1".to_string()),
            ("sys/devices/cpu_atom/cpus".to_string(), "2-3".to_string()),
        ];
        for (c, f) in [(0, 5_000_000), (1, 5_000_000), (2, 3_800_000), (3, 3_800_000)] {
            files.push((format!("{cpu}/cpu{c}/cpufreq/cpuinfo_max_freq"), f.to_string()));
        }
        let refs: Vec<(&str, &str)> = files.iter().map(|(a, b)| (a.as_str(), b.as_str())).collect();
        let f = fixture("0-3", &refs);
        let d = discover(f.path(), &Overrides::default()).unwrap();
        assert!((d.cpus[2].capacity - 778.24).abs() < 0.01);
        assert_eq!(d.cpus[2].source, "sysfs intel hybrid cpu_core/cpu_atom");
        assert_eq!(d.topo.classes.iter().map(|c| c.name.as_str()).collect::<Vec<_>>(), vec!["fast", "slow"]);
    }

    #[test]
    fn max_freq_alone_and_three_classes() {
        let cpu = "sys/devices/system/cpu";
        let f = fixture(
            "0-2",
            &[
                (&format!("{cpu}/cpu0/cpufreq/cpuinfo_max_freq"), "3000000"),
                (&format!("{cpu}/cpu1/cpufreq/cpuinfo_max_freq"), "2000000"),
                (&format!("{cpu}/cpu2/cpufreq/cpuinfo_max_freq"), "1000000"),
            ],
        );
        let d = discover(f.path(), &Overrides::default()).unwrap();
        let names: Vec<_> = d.topo.classes.iter().map(|c| c.name.clone()).collect();
        assert_eq!(names, vec!["fast", "mid1", "slow"]);
        // 2/3 and 1/3 of the fastest.
        assert!((d.topo.classes[1].speed - 2.0 / 3.0).abs() < 1e-9);
    }

    #[test]
    fn declared_fast_on_a_symmetric_machine_and_config_capacities() {
        let f = fixture("0-1", &[]);
        let ov = Overrides { fast: Some(CpuSet::parse_list("0").unwrap()), ..Default::default() };
        let d = discover(f.path(), &ov).unwrap();
        // Symmetric measured capacities: the declared slow class gets the assumed half speed.
        assert_eq!(d.topo.fast_cpus.to_list(), "0");
        assert_eq!(d.topo.classes[1].speed, DECLARED_SLOW_RATIO);
        assert!(d.cpus[1].source.starts_with("declared slow"), "{}", d.cpus[1].source);

        let mut cap = BTreeMap::new();
        cap.insert(0, 2.0);
        cap.insert(1, 1.0);
        let d = discover(f.path(), &Overrides { capacity: cap, ..Default::default() }).unwrap();
        assert_eq!((d.cpus[0].capacity, d.cpus[1].capacity), (1024.0, 512.0));
        assert_eq!(d.cpus[1].source, "config capacity table");

        let ov = Overrides { fast: Some(CpuSet::parse_list("5").unwrap()), ..Default::default() };
        let e = discover(f.path(), &ov).unwrap_err();
        assert!(e.to_string().contains("CPU 5 is not online (online CPUs: 0-1)"), "{e}");
    }

    #[test]
    fn sparse_online_cpus_map_to_dense_ids() {
        let f = fixture("0,2-3", &[]);
        let d = discover(f.path(), &Overrides::default()).unwrap();
        assert_eq!(d.linux_ids, vec![0, 2, 3]);
        let lin = d.to_linux(&CpuSet::parse_list("1-2").unwrap());
        assert_eq!(lin.to_list(), "2-3");
        assert_eq!(d.from_linux(&CpuSet::parse_list("0,3,7").unwrap()).to_list(), "0,2");
        assert!(discover(Path::new("/nonexistent-root"), &Overrides::default()).is_err());
    }
}
