# Shared set-up of the probe build scripts, which run here, not on the
# device (source it): `bench_exe` prints the path of the runtime's `main`
# bench executable of the tree in $PWD, building it first.
bench_exe() {
  cargo bench -q -p etwgpu-runtime --bench main --no-run --message-format=json 2>/dev/null | python3 -c '
import json, sys
exe = [m["executable"] for m in map(json.loads, sys.stdin)
       if m.get("reason") == "compiler-artifact" and m["target"]["kind"] == ["bench"] and m.get("executable")]
print(exe[-1])'
}
