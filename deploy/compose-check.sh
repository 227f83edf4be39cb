#!/usr/bin/env bash
# Opt-in check (not part of the test suite): run docker-compose.yml for real on this host.
#
#   deploy/compose-check.sh [--fresh] [--screenshot docs/flower-tasks.png]
#
# --fresh: rebuild the base and Redis images and the transqueue image without Docker's cache.
#
# 1. builds local base and Redis images without any registry (deploy/base-image.sh), then the
#    transqueue image from them (the Dockerfile's BASE build argument);
# 2. starts the stack: Redis (password, AOF), 2 workers (2 CPUs, 512 MB each), the scheduler
#    (beat), Flower (basic auth, the only published port) and the metrics exporter;
# 3. submits a real job (2000 sentences made of tests/data/tiny_corpus.tsv, demo model, int8),
#    kills one worker container mid-job (docker kill) and waits for the job to complete;
# 4. checks that the fetched output equals `transqueue translate` of the same file (same image,
#    bundle and precision), that Flower's task list shows `job=… chunk=… sentences=…` and never
#    a source sentence (optionally: a headless Chromium screenshot of its tasks page);
# 5. reports each container's peak memory, sampled with `docker stats` during the run;
# and takes the stack down (volumes too) however it ends.
#
# Installs nothing. Prerequisites (Debian/Ubuntu, as root):
#   apt-get install docker.io docker-compose debootstrap   # chromium too, for --screenshot
#   dockerd >/var/log/dockerd.log 2>&1 &                   # if no docker service runs
# pip inside the image build needs PyPI. Exit status 0 when every check passed.
set -euo pipefail

ROOT=$(cd "$(dirname "$0")/.." && pwd)
cd "$ROOT"
SCREENSHOT="" FRESH=()
while [[ $# -gt 0 ]]; do
    case $1 in
        --fresh) FRESH=(--rebuild); shift ;;
        --screenshot) SCREENSHOT=$(realpath -m "${2:?--screenshot needs a file}"); shift 2 ;;
        *) echo "usage: $0 [--fresh] [--screenshot FILE.png]" >&2; exit 2 ;;
    esac
done

if docker compose version >/dev/null 2>&1; then COMPOSE=(docker compose); else COMPOSE=(docker-compose); fi
export COMPOSE_PROJECT_NAME=transqueue-check
export TRANSQUEUE_BASE_IMAGE=${TRANSQUEUE_BASE_IMAGE:-transqueue-base:bookworm}
export REDIS_IMAGE=${REDIS_IMAGE:-transqueue-redis:bookworm}
export REDIS_PASSWORD FLOWER_PASSWORD
REDIS_PASSWORD=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
FLOWER_PASSWORD=$(od -An -N12 -tx1 /dev/urandom | tr -d ' \n')
export FLOWER_PORT=${FLOWER_PORT:-15555}
export TRANSQUEUE_BUNDLE=""          # the demo model inside the image
export TRANSQUEUE_PRECISION=int8
WORK=$(mktemp -d /tmp/transqueue-compose-check.XXXXXX)
export TRANSQUEUE_DATA=$WORK/data TRANSQUEUE_BUNDLES=$WORK/bundles
DOC=tiny_corpus.txt
OUT=tiny_corpus.zh.txt
SENTENCES=${COMPOSE_CHECK_SENTENCES:-2000}   # enough to kill a worker mid-job
SAMPLER=""

say() { printf '%s\n' "$*"; }
fail() { say "FAIL: $*"; exit 1; }
compose() { "${COMPOSE[@]}" "$@"; }
in_stack() { compose exec -T scheduler "$@"; }
cleanup() {
    [[ -n "$SAMPLER" ]] && kill "$SAMPLER" 2>/dev/null || true
    compose down -v --remove-orphans >/dev/null 2>&1 || true
    rm -rf "$WORK"
}
trap cleanup EXIT

settled() {  # "settled total" of a job, from `transqueue status`
    in_stack transqueue status "$1" | awk '/^sentences/ { split($2, a, "/"); print a[1], a[2] }'
}

sample_stats() {  # every container's memory, a round every 2-3 s (docker stats is slow), until killed
    while true; do
        docker stats --no-stream --format '{{.Name}}\t{{.MemUsage}}' \
            $(compose ps -q) 2>/dev/null || true
        sleep 1
    done >>"$WORK/stats.tsv"
}

say "== compose-check $(date -u '+%Y-%m-%d %H:%M UTC') on $(. /etc/os-release && echo "$PRETTY_NAME"), $(nproc) CPUs, $("${COMPOSE[@]}" version --short 2>/dev/null || "${COMPOSE[@]}" version | head -1)"
bash deploy/base-image.sh "${FRESH[@]}"
start=$SECONDS
compose build ${FRESH:+--no-cache} worker >"$WORK/build.log" 2>&1 || { tail -30 "$WORK/build.log"; fail "image build"; }
say "image: transqueue:latest built in $((SECONDS - start)) s, $(docker image inspect -f '{{.Size}}' transqueue:latest | numfmt --to=iec)"
docker run --rm transqueue:latest python -c "import importlib.util as u; assert not [m for m in ('torch', 'transformers', 'sentencepiece') if u.find_spec(m)]" \
    || fail "export-time packages in the image"

mkdir -p "$TRANSQUEUE_DATA/in" "$TRANSQUEUE_BUNDLES"
python3 - "$SENTENCES" >"$TRANSQUEUE_DATA/in/$DOC" <<'EOF'
import sys  # N distinct sentences, each two of the corpus joined: "Kiss me, and Tom swam."
corpus = [line.split("\t")[0] for line in open("tests/data/tiny_corpus.tsv", encoding="utf-8")]
n, size = int(sys.argv[1]), len(corpus)
for i in range(n):
    first, second = corpus[i % size], corpus[(i // size + 1 + i) % size]
    print(f"{first.rstrip('.!?')}, and {second}")
EOF
chown -R 1000:1000 "$TRANSQUEUE_DATA"   # the image's transqueue user
sentences=$(wc -l <"$TRANSQUEUE_DATA/in/$DOC")

compose up -d --scale worker=2 >"$WORK/up.log" 2>&1 || { cat "$WORK/up.log"; fail "compose up"; }
sample_stats &
SAMPLER=$!
for _ in $(seq 60); do
    ready=$(in_stack celery -A worker inspect ping --timeout 2 2>/dev/null | grep -c pong || true)
    [[ "$ready" -ge 2 ]] && break
    sleep 2
done
[[ "$ready" -ge 2 ]] || { compose logs --tail 20 worker; fail "workers not ready"; }
say "stack: $(compose ps --services | sort | tr '\n' ' ')(2 workers answer ping)"
limits=$(docker inspect -f '{{.HostConfig.NanoCpus}} {{.HostConfig.Memory}}' $(compose ps -q worker) | sort -u)
[[ "$limits" == "2000000000 536870912" ]] || fail "worker limits (NanoCpus Memory): $limits"
say "workers: 2 CPUs and 512 MiB each (docker inspect)"
aof=$(compose exec -T redis redis-cli config get appendonly | tr '\n' ' ')
noauth=$(compose exec -T redis env -u REDISCLI_AUTH redis-cli ping 2>&1 || true)
[[ "$aof" == "appendonly yes "* && "$noauth" == *NOAUTH* ]] || fail "redis: $aof / $noauth"
say "redis: appendonly yes; without the password: $noauth"
published=$(docker ps --filter "label=com.docker.compose.project=$COMPOSE_PROJECT_NAME" \
    --format '{{.Names}} {{.Ports}}' | awk '/->/ { print $1 }')
[[ "$published" == *flower* && $(wc -l <<<"$published") -eq 1 ]] || fail "published ports: $published"
say "published: only flower, $(compose port flower 5555)"
code=$(curl -s -o /dev/null -w '%{http_code}' "http://127.0.0.1:$FLOWER_PORT/")
[[ "$code" == 401 ]] || fail "Flower answered $code without credentials (401 expected)"
say "flower: 401 without credentials"

mkdir -p "$TRANSQUEUE_DATA/ref" && chown 1000:1000 "$TRANSQUEUE_DATA/ref"
in_stack transqueue translate "/data/in/$DOC" --out "/data/ref/$OUT" >/dev/null 2>&1 || fail "transqueue translate"
job=$(in_stack transqueue submit "/data/in/$DOC" --out /data/out)
submitted=$SECONDS
say "job: $job, $sentences distinct sentences made of tests/data/tiny_corpus.tsv pairs"

victim=$(compose ps -q worker | sed -n 1p)
while true; do
    read -r done total <<<"$(settled "$job")"
    [[ "$done" -gt 0 && "$done" -lt "$total" ]] && break
    [[ "$done" -ge "$total" ]] && fail "job finished before a worker could be killed"
    sleep 0.5
done
docker kill "$victim" >/dev/null
say "killed worker $(docker inspect -f '{{.Name}}' "$victim" | tr -d /) at $done/$total sentences settled"

if [[ -n "$SCREENSHOT" ]]; then  # while the job runs, on the one worker left
    page="http://admin:$FLOWER_PASSWORD@127.0.0.1:$FLOWER_PORT/tasks"
    browse=(chromium --headless --no-sandbox --disable-gpu --hide-scrollbars --virtual-time-budget=8000)
    "${browse[@]}" --window-size=1600,600 --screenshot="$SCREENSHOT" "$page" >/dev/null 2>&1 \
        || fail "Chromium screenshot of Flower's tasks page"
    "${browse[@]}" --dump-dom "$page" 2>/dev/null >"$WORK/tasks.html" || fail "Chromium --dump-dom"
    seen=$(python3 deploy/flower_tasks_check.py "$WORK/tasks.html" "$TRANSQUEUE_DATA/in/$DOC" "$job") \
        || fail "Flower's tasks page: $seen"
    say "flower tasks page (Chromium): $seen"
    say "flower: screenshot in $SCREENSHOT, $(du -k "$SCREENSHOT" | cut -f1) KB"
fi
in_stack transqueue wait "$job" --quiet || fail "job $job did not complete"
say "job: complete $((SECONDS - submitted)) s after submit; $(in_stack transqueue status "$job" \
    | awk '/^(sentences|dead letters)/' | tr -s ' ' | paste -sd ';' | sed 's/;/, /g')"
say "killed worker: $(docker inspect -f '{{.State.Status}}, exit code {{.State.ExitCode}}, {{.RestartCount}} restarts' "$victim")"

curl -sf -u "admin:$FLOWER_PASSWORD" "http://127.0.0.1:$FLOWER_PORT/api/tasks" >"$WORK/tasks.json" \
    || fail "Flower /api/tasks"
seen=$(python3 deploy/flower_tasks_check.py "$WORK/tasks.json" "$TRANSQUEUE_DATA/in/$DOC" "$job") \
    || fail "Flower's task list: $seen"
say "flower /api/tasks: $seen"

in_stack transqueue fetch "$job" >/dev/null 2>&1 || fail "transqueue fetch"
cmp "$TRANSQUEUE_DATA/out/$OUT" "$TRANSQUEUE_DATA/ref/$OUT" || fail "fetched output differs from transqueue translate"
say "output: $OUT ($(wc -l <"$TRANSQUEUE_DATA/out/$OUT") lines) byte-identical to transqueue translate"

kill "$SAMPLER" 2>/dev/null || true
SAMPLER=""
say "peak memory (docker stats, $(wc -l <"$WORK/stats.tsv") samples):"
python3 - "$WORK/stats.tsv" <<'EOF'
import re, sys
units = {"B": 1, "KiB": 2**10, "MiB": 2**20, "GiB": 2**30}
peak: dict[str, tuple[float, str]] = {}
for line in open(sys.argv[1]):
    name, usage = line.rstrip("\n").split("\t")
    used, limit = (part.strip() for part in usage.split("/"))
    number, unit = re.fullmatch(r"([\d.]+)\s*(\w+)", used).groups()
    size = float(number) * units[unit]
    if size > peak.get(name, (0.0, ""))[0]:
        peak[name] = (size, limit)
for name, (size, limit) in sorted(peak.items()):
    print(f"  {name:32} {size / 2**20:7.1f} MiB  (limit {limit})")
EOF
say "== compose-check passed"
