"""The Xen lab's measurements of the host (scripts/xen-lab/lab.py, docs/xen.md), on worked examples:
the pCPU threads' stays and stalls from a host switch trace, and a pCPU's ms per work unit from
Xen's own run-time counters. No QEMU: the functions are pure."""

from __future__ import annotations

import importlib.util

import pytest

from conftest import ROOT


@pytest.fixture(scope="module")
def lab():
    spec = importlib.util.spec_from_file_location("xen_lab", ROOT / "scripts" / "xen-lab" / "lab.py")
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def test_short_stalls_merge_into_the_stays_around_them(lab):
    # Stalls under 0.1 ms join their neighbours; what precedes the first long stall and follows
    # the last may belong to a stay outside the trace and is dropped.
    seq = [
        ("b", 1),
        ("s", 0.05),
        ("b", 2),
        ("s", 3),
        ("b", 0.5),
        ("s", 0.2),
        ("b", 1),
        ("s", 0.04),
        ("b", 1),
        ("s", 2),
        ("b", 7),
    ]
    bursts, stalls = lab.merge_short_stalls(seq, 0.1)
    assert bursts == pytest.approx([0.5, 2.04])
    assert stalls == [3, 0.2, 2]


# Thread 11 (pCPU 1): preempted at 1.000 s, back at 1.0005 (a 0.5 ms stall), sleeps at 1.0015
# after a 1 ms stay, back 50 us later, preempted at 1.00355 after 2 ms, back at 1.00455 (1 ms).
TRACE = """\
  1.000000: prev_comm=CPU 1/TCG prev_pid=11 prev_prio=120 prev_state=R ==> next_comm=cc1 next_pid=99 next_prio=139
  1.000500: prev_comm=cc1 prev_pid=99 prev_prio=139 prev_state=R ==> next_comm=CPU 1/TCG next_pid=11 next_prio=120
  1.001500: prev_comm=CPU 1/TCG prev_pid=11 prev_prio=120 prev_state=S ==> next_comm=swapper/0 next_pid=0 next_prio=120
  1.001550: prev_comm=swapper/0 prev_pid=0 prev_prio=120 prev_state=R ==> next_comm=CPU 1/TCG next_pid=11 next_prio=120
  1.003550: prev_comm=CPU 1/TCG prev_pid=11 prev_prio=120 prev_state=R+ ==> next_comm=cc1 next_pid=99 next_prio=139
  1.004550: prev_comm=cc1 prev_pid=99 prev_prio=139 prev_state=R ==> next_comm=CPU 1/TCG next_pid=11 next_prio=120
"""


def test_a_switch_trace_gives_each_pcpus_stays_and_stalls_by_cause(lab):
    st = lab.host_switch_stats(TRACE, {11: 1})
    assert st["lost_records"] == 0
    p = st["pcpus"]["1"]
    assert p["bursts"] == 2 and p["burst_mean_ms"] == pytest.approx(1.5)
    assert (p["preempted_n"], p["slept_n"]) == (2, 1)
    assert p["preempted_mean_ms"] == pytest.approx(0.75) and p["slept_mean_ms"] == pytest.approx(0.05)
    # Merged: 1 + 0.05 + 2 ms is one stay between the stalls of 0.5 and 1 ms.
    assert p["merged"]["burst_mean_ms"] == pytest.approx(3.05)
    assert p["merged"]["stall_mean_ms"] == pytest.approx(0.75)


def test_a_symmetric_runs_ms_per_unit_is_xens_run_time_of_its_cpu_bound_domains(lab):
    sc = {
        "domain": [
            {
                "name": "lu",
                "workload": ["barrier", "--threads", "2", "--phases", "200", "--phase-units", "400", "--wait", "spin"],
            },
            {"name": "hit1", "workload": ["spin", "--threads", "2", "--units", "160000"]},
            {"name": "hit2", "workload": ["spin", "--threads", "2", "--units", "160000"]},
        ]
    }
    # Guests are domains 1.. in creation order (0 is dom0); the barrier domain is left out.
    raw = {
        "counters": {
            0: {"slow_ms": "9000"},
            1: {"fast_ms": "0", "slow_ms": "21676"},
            2: {"fast_ms": "0", "slow_ms": "32837"},
            3: {"fast_ms": "0", "slow_ms": "32767"},
        }
    }
    u = lab.run_unit_ms(sc, raw)
    # (32837 + 32767) ms over 2 x 2 x 160000 units.
    assert u["units"] == 640000 and u["ms_per_unit"] == pytest.approx(65604 / 640000)
