//! Every rt-app example Debian's `rt-app` package ships
//! (`/usr/share/doc/rt-app/examples`, installed by `.ci/run`) either compiles
//! or is refused with the precise reason, and the reasons are the ones rt-app
//! itself would give: the two `video-*` files are not JSON (`"suspend",` has
//! no value; rt-app: "Error while parsing input JSON"), and the `merge`
//! directory holds fragments for rt-app's `merge.py` in its pre-1.0 grammar.

use ampsched_model::rtapp::compile;
use ampsched_model::topology::Topology;
use std::path::{Path, PathBuf};

const EXAMPLES: &str = "/usr/share/doc/rt-app/examples";

fn json_files(d: &Path, out: &mut Vec<PathBuf>) {
    for e in std::fs::read_dir(d).expect("read dir") {
        let p = e.expect("dir entry").path();
        if p.is_dir() {
            json_files(&p, out);
        } else if p.extension().is_some_and(|x| x == "json") {
            out.push(p);
        }
    }
}

#[test]
fn debian_rt_app_examples_load_or_get_a_precise_error() {
    let dir = Path::new(EXAMPLES);
    if !dir.is_dir() {
        // CI installs the package (.ci/run), so there the examples must be present.
        assert!(std::env::var_os("CI").is_none(), "{EXAMPLES} missing on CI: apt-get install rt-app");
        eprintln!("skipped: {EXAMPLES} not found (apt-get install rt-app)");
        return;
    }
    let topo = Topology::fast_slow(1, 2.0, 7, 1.0, 4);
    let mut files = Vec::new();
    json_files(dir, &mut files);
    files.sort();
    let (mut loaded, mut refused) = (Vec::new(), Vec::new());
    for f in &files {
        let name = f.strip_prefix(dir).expect("under the dir").display().to_string();
        let text = std::fs::read_to_string(f).expect("read");
        match compile(&text, &name, &topo) {
            Ok(app) => {
                assert!(!app.threads.is_empty(), "{name}");
                // The only warnings are global keys rt-app ignores (`frag`).
                for w in &app.warnings {
                    assert!(w.contains("field `global.frag`: unknown global key `frag` ignored"), "{w}");
                }
                loaded.push(name);
            }
            Err(e) => refused.push((name, e.to_string())),
        }
    }
    for (name, e) in &refused {
        let why = if name.starts_with("video-") {
            "not valid rt-app JSON: expected `:` after key \"suspend\""
        } else if name == "merge/global.json" || name == "merge/resources.json" {
            "fragment (only `global` or `resources`) for rt-app's doc/merge.py"
        } else if name.starts_with("merge/thread") {
            "`exec` is rt-app's pre-1.0 grammar"
        } else {
            panic!("{name} refused: {e}");
        };
        assert!(e.contains(why), "{name}: {e}");
    }
    // Debian's rt-app 1.0 ships 24 JSON files: 16 load, 8 are refused as above.
    assert_eq!((loaded.len(), refused.len()), (16, 8), "loaded {loaded:?}");
}
