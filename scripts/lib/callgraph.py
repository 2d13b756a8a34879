"""scripts/lib/callgraph.py: the workspace files one call runs through, and the calls
between them, from two callgrind runs of N1 and N2 calls (scripts/call-cost.sh,
MCPX_COST_FILES).

Usage: callgraph.py CG1 CG2 N1 N2 [list]

  files      the workspace files (crates/…) with code that runs on every call: a file
             counts when its functions' calls grow with the calls made
  calls      per call, the calls from a function in one workspace file to a function
             in another

Meant for an unoptimised build, whose call graph is the source's and not what
inlining left of it.
"""
import collections, re, sys
cg1, cg2, n1, n2, listing = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4]), sys.argv[5] if len(sys.argv) > 5 else ""

def workspace(path):
    # A file of the workspace's crates, as crates/<crate>/…; None for any other.
    m = re.search(r"(?:^|/)(crates/[^/]+/.*\.rs)$", path)
    if m and "/.cargo/" not in path and "/rustc/" not in path:
        return m.group(1)
    return None

def edges(path):
    # callgrind's format: fl= the current function's file, fi=/fe= the file of the
    # lines that follow (inlined code), fn= the function; cfi=/cfl= and cfn= name a
    # call's target, and the calls= line after them its count. Names are compressed:
    # "(n) name" defines n, "(n)" alone refers to it.
    names = {}
    def name(kind, text):
        m = re.match(r"\((\d+)\)(?:\s+(.*))?$", text)
        if not m:
            return text
        key = (kind, m.group(1))
        if m.group(2) is not None:
            names[key] = m.group(2)
        return names.get(key, "")
    counts = collections.Counter()
    fl = here = target_file = None
    for line in open(path, errors="replace"):
        line = line.rstrip("\n")
        if line.startswith("fl="):
            fl = here = name("fl", line[3:])
        elif line.startswith(("fi=", "fe=")):
            here = name("fl", line[3:])
        elif line.startswith("fn="):
            name("fn", line[3:])
            here = fl
        elif line.startswith(("cfi=", "cfl=")):
            target_file = name("fl", line[4:])
        elif line.startswith("cfn="):
            name("fn", line[4:])
        elif line.startswith("calls="):
            n = int(line[6:].split()[0])
            counts[(here, target_file)] += n
            target_file = None
    return counts

a, b = edges(cg1), edges(cg2)
calls = n1 - n2
per_call = collections.Counter()
files = collections.Counter()
for (src, dst), n in a.items():
    grown = (n - b.get((src, dst), 0)) / calls
    if grown < 0.5:
        continue
    s, d = workspace(src or ""), workspace(dst or "")
    for f in (s, d):
        if f:
            files[f] += 0
    if s and d and s != d:
        per_call[(s, d)] += grown
        files[s] += grown
        files[d] += grown
crates = sorted({f.split("/")[1] for f in files})
switches = sum(per_call.values())
print(f"{len(files)} workspace files in {len(crates)} crates ({', '.join(crates)}), "
      f"{switches:.0f} calls between them per call")
if listing == "list":
    for f in sorted(files):
        out_n = sum(v for (s, _), v in per_call.items() if s == f)
        in_n = sum(v for (_, d), v in per_call.items() if d == f)
        print(f"  {f}: {in_n:.0f} in, {out_n:.0f} out")
