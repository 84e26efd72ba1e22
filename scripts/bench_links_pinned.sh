#!/usr/bin/env bash
# Issue 42's "1,024 beds at a 60-s cadence with both links on" with the receivers off the
# measured cores: holmes bench at 1,024 beds, links off and on alternately (off, on, off, on),
# the whole bench (simulated monitors and the daemon, its child) pinned to BENCH_CPUS (0,1:
# the build machine's two cores) and the receivers to PEER_CPUS (4-15), as on a 16-core lent
# machine. It reads from G (target/gpu-links, carried to that machine): holmes.xz (the release
# binary, xz), links.toml (config/holmes.toml with [hl7] and [fhir] enabled), hl7_peer.py
# (tests/), fhir_indexed.py (tests/fhir_peer/indexed.py: that machine has no node, so no
# Medplum) and the hl7 package's wheel (no registry there). Writes log.txt, bench-RUN.json and
# peers.tgz (what the receivers got, the bench's stderr) under $OUT.
# Usage: scripts/bench_links_pinned.sh BEDS DURATION SPEED (from the repo root; G=target/gpu-links
# and $OUT as above; LINKS_CADENCE=SECS shortens the cadence for a local smoke test).
set -u
G=${G:-target/gpu-links}
BEDS=${1:-1024}; DUR=${2:-100}; SPEED=${3:-1}
OUT=${OUT:-/tmp/gpuout}; mkdir -p $OUT
exec > >(tee -a $OUT/log.txt) 2>&1
echo "== $(date -u +%FT%TZ) $(uname -m) $(nproc) cores; node: $(command -v node || echo absent) $(node --version 2>/dev/null)"
python3 --version; lscpu | grep -E "Model name|^CPU\(s\)|Thread|MHz" | head -5
W=/tmp/gl; mkdir -p $W
xz -dc $G/holmes.xz > $W/holmes && chmod +x $W/holmes || exit 1
python3 -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --upgrade --target $W/site $G/hl7-*.whl || exit 1
export PYTHONPATH=$W/site
python3 -c "import hl7.mllp; print('hl7', hl7.__version__ if hasattr(hl7,'__version__') else 'ok')"
$W/holmes --version 2>/dev/null || true
ulimit -n 65536 2>/dev/null || ulimit -n $(ulimit -Hn)
LINKS=$G/links.toml
if [ -n "${LINKS_CADENCE:-}" ]; then # local smoke test only: a short cadence so the links send
  LINKS=$W/links.toml; sed "s/^cadence_secs = 60.0/cadence_secs = $LINKS_CADENCE/" $G/links.toml > $LINKS
fi
PIDS=()
start_peers() { # $1: run tag
  local d=$W/peer-$1; mkdir -p $d; echo aa > $d/hl7.control; echo ok > $d/control
  taskset -c ${PEER_CPUS:-4-15} python3 $G/hl7_peer.py 2575 $d/hl7.control $d/hl7.jsonl > $d/hl7.log 2>&1 & PIDS+=($!); HP=$!
  taskset -c ${PEER_CPUS:-4-15} python3 $G/fhir_indexed.py 8103 $d > $d/fhir.log 2>&1 & PIDS+=($!); FP=$!
  for i in $(seq 100); do [ -f $d/port ] && python3 -c "import socket;socket.create_connection(('127.0.0.1',2575)).close()" 2>/dev/null && break; sleep 0.1; done
}
stop_peers() { # $1 tag
  local d=$W/peer-$1
  local hc=$(awk '{print ($14+$15)/100}' /proc/$HP/stat) fc=$(awk '{print ($14+$15)/100}' /proc/$FP/stat)
  kill $HP $FP; wait $HP $FP 2>/dev/null
  echo "peers $1: hl7 received $(wc -l < $d/hl7.jsonl 2>/dev/null || echo 0) messages (peer CPU ${hc} s); fhir $(wc -l < $d/requests.jsonl 2>/dev/null || echo 0) writes, $(wc -l < $d/store.jsonl 2>/dev/null || echo 0) stored (peer CPU ${fc} s)"
}
sample_threads() { # background: the daemon's outbox threads' CPU, last reading kept
  local f=$1; while sleep 2; do
    p=$(pgrep -f "holmes serve --config" | head -1); [ -n "$p" ] || continue
    grep -h -E "holmes-(hl7|fhir)-o" /proc/$p/task/*/stat 2>/dev/null | awk '{print $2, ($14+$15)/100}' > $f.tmp && mv $f.tmp $f
  done
}
n=0
for mode in off on off on; do
  n=$((n+1)); tag=$n-$mode
  echo "== run $tag $(date -u +%T)"
  if [ $mode = on ]; then start_peers $tag; CFG="--config $LINKS"; else CFG=""; fi
  sample_threads $W/threads-$tag.txt & SP=$!
  t0=$(date +%s)
  taskset -c ${BENCH_CPUS:-0,1} $W/holmes bench --beds $BEDS --duration $DUR --speed $SPEED $CFG --json > $OUT/bench-$tag.json 2> $W/bench-$tag.err
  echo "rc $? in $(( $(date +%s) - t0 )) s"
  kill $SP 2>/dev/null; wait $SP 2>/dev/null
  grep -v "^\s" $W/bench-$tag.err | tail -3
  [ $mode = on ] && { stop_peers $tag; echo "outbox threads (name, CPU s): $(cat $W/threads-$tag.txt 2>/dev/null | tr '\n' ' ')"; }
  python3 - $OUT/bench-$tag.json <<'PY'
import json,sys
try: r=json.load(open(sys.argv[1]))[0]
except Exception as e: print("no report", e); sys.exit()
print(f"{sys.argv[1].split('/')[-1]}: windows {r['windows']} scored {r['scored']} partial {r['partial']} superseded {r['superseded']} dropped {r['dropped']}; p50 {r['latency_ms_p50']:.1f} p95 {r['latency_ms_p95']:.1f} p99 {r['latency_ms_p99']:.1f} ms; daemon CPU {r['daemon_cpu_cores']:.3f} cores, sim {r['simulator_cpu_cores']:.3f}; RSS {r['daemon_rss_mb']:.0f} MB; lost {r['frames_sent']-r['frames_ingested']} gaps {r['gaps']}; {r['seconds']:.1f} s")
PY
done
tar -C $W -czf $OUT/peers.tgz $(cd $W && ls -d peer-* bench-*.err threads-*) 2>/dev/null
echo "== done $(date -u +%T)"
