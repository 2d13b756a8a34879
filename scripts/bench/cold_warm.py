"""Times `mcpx call` and `mcpx tools` cold (a gateway of the command's own) against warm
(`mcpx daemon` running), interleaved in one run, and prints a Markdown table.

    cold_warm.py MCPX RUNS RUN_DIR COLD_CONFIG WARM_CONFIG TOOL ARGS EXPECT

The two configurations have the same servers; a daemon serves WARM_CONFIG (its
XDG_RUNTIME_DIR is RUN_DIR) and none serves COLD_CONFIG. Each run of each command is
one process started with posix_spawn and waited for; its wall time is measured with
perf_counter, from the spawn to the exit. Each cold and warm run's output is checked
(EXPECT in a call's output, a non-empty list), so a failing command is never timed as
a fast one. Rows give the median, p10 and p90 of RUNS runs, and the ratio of the
medians. A last row times `mcpx --version` the same way: the floor of any command,
starting a process of this binary and nothing else.
"""

import os
import statistics
import sys
import time


def timed(argv, env):
    r, w = os.pipe()
    actions = [(os.POSIX_SPAWN_DUP2, w, 1), (os.POSIX_SPAWN_CLOSE, r)]
    start = time.perf_counter()
    pid = os.posix_spawn(argv[0], argv, env, file_actions=actions)
    os.close(w)
    out = b""
    while chunk := os.read(r, 65536):
        out += chunk
    _, status = os.waitpid(pid, 0)
    elapsed = time.perf_counter() - start
    os.close(r)
    return elapsed, os.waitstatus_to_exitcode(status), out.decode(errors="replace")


def main():
    mcpx, runs, run_dir, cold_cfg, warm_cfg, tool, args, expect = sys.argv[1:9]
    runs = int(runs)
    env = dict(os.environ, XDG_RUNTIME_DIR=run_dir, MCPX_LOG="error")
    env.pop("MCPX_AUTOSTART", None)
    commands = {
        "call": lambda cfg: [mcpx, "call", tool, "--args", args, "--config", cfg],
        "tools": lambda cfg: [mcpx, "tools", "--config", cfg],
    }
    times = {(c, w): [] for c in commands for w in ("cold", "warm")}
    floor = []
    for i in range(runs):
        t, code, _ = timed([mcpx, "--version"], env)
        if code != 0:
            sys.exit("mcpx --version failed")
        floor.append(t * 1000)
        for name, argv in commands.items():
            # The order alternates, so that drift lands on both alike.
            order = [("cold", cold_cfg), ("warm", warm_cfg)]
            if i % 2:
                order.reverse()
            for which, cfg in order:
                t, code, out = timed(argv(cfg), env)
                ok = code == 0 and (expect in out if name == "call" else out.strip())
                if not ok:
                    sys.exit(f"{which} {name} failed (exit {code}):\n{out}")
                times[(name, which)].append(t * 1000)
    print(f"| command | cold median (ms) | cold p10–p90 | warm median (ms) | warm p10–p90 | cold / warm |")
    print("|---|---:|---:|---:|---:|---:|")
    verdict = 0
    for name in commands:
        cold, warm = times[(name, "cold")], times[(name, "warm")]
        q = lambda xs: statistics.quantiles(xs, n=10) if len(xs) >= 2 else [xs[0]] * 9
        cm, wm = statistics.median(cold), statistics.median(warm)
        print(
            f"| `mcpx {name}` | {cm:.1f} | {q(cold)[0]:.1f}–{q(cold)[-1]:.1f} "
            f"| {wm:.2f} | {q(warm)[0]:.2f}–{q(warm)[-1]:.2f} | {cm / wm:.0f}× |"
        )
        if not (wm <= 5.0 and cm / wm >= 20):
            verdict = 1
    fq = statistics.quantiles(floor, n=10) if len(floor) >= 2 else [floor[0]] * 9
    print(f"| `mcpx --version` (floor) | | | {statistics.median(floor):.2f} | {fq[0]:.2f}–{fq[-1]:.2f} | |")
    print()
    print(f"{runs} runs of each, interleaved; the targets: warm median ≤ 5 ms and ≥ 20× faster than cold.")
    print("targets met" if verdict == 0 else "targets NOT met")
    sys.exit(verdict)


if __name__ == "__main__":
    main()
