#!/usr/bin/env bash
# Build the two local images that compose-check.sh needs, without pulling from any registry:
#   transqueue-base:bookworm   Debian 12 (minbase, debootstrap) with python3 + venv, the base
#                              of the transqueue image (Dockerfile build argument BASE);
#   transqueue-redis:bookworm  the same base with Debian's redis-server 7 (REDIS_IMAGE).
# The base trusts the host's extra CA certificates (/usr/local/share/ca-certificates), so that
# pip and apt work inside builds behind a TLS-intercepting proxy.
# Needs root, debootstrap and a running dockerd. Existing images are kept (--rebuild: build anew;
# the tags move to the new images).
set -euo pipefail

BASE_IMAGE=${TRANSQUEUE_BASE_IMAGE:-transqueue-base:bookworm}
REDIS_IMAGE=${REDIS_IMAGE:-transqueue-redis:bookworm}
SUITE=${DEBIAN_SUITE:-bookworm}
MIRROR=${DEBIAN_MIRROR:-http://deb.debian.org/debian}
HERE=$(cd "$(dirname "$0")" && pwd)

REBUILD=""
[[ "${1:-}" == "--rebuild" ]] && REBUILD=1
missing() { [[ -n "$REBUILD" ]] || ! docker image inspect "$1" >/dev/null 2>&1; }

if missing "$BASE_IMAGE"; then
    rootfs=$(mktemp -d /tmp/transqueue-rootfs.XXXXXX)
    trap 'rm -rf "$rootfs"' EXIT
    echo "base: debootstrap $SUITE into $rootfs"
    debootstrap --variant=minbase --include=python3,python3-venv,ca-certificates \
        "$SUITE" "$rootfs" "$MIRROR" >"$rootfs.log" 2>&1 \
        || { tail -20 "$rootfs.log"; exit 1; }
    rm -f "$rootfs.log"
    if compgen -G "/usr/local/share/ca-certificates/*.crt" >/dev/null; then
        cp /usr/local/share/ca-certificates/*.crt "$rootfs/usr/local/share/ca-certificates/"
        chroot "$rootfs" update-ca-certificates >/dev/null 2>&1
    fi
    printf '[global]\ncert = /etc/ssl/certs/ca-certificates.crt\n' >"$rootfs/etc/pip.conf"
    chroot "$rootfs" apt-get clean
    rm -rf "$rootfs"/var/lib/apt/lists/*
    tar -C "$rootfs" -c . | docker import \
        --change 'ENV PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin' \
        --change 'ENV LANG=C.UTF-8' \
        --change 'CMD ["python3"]' - "$BASE_IMAGE" >/dev/null
fi
echo "base: $BASE_IMAGE, $(docker image inspect -f '{{.Size}}' "$BASE_IMAGE" | numfmt --to=iec), $(docker run --rm "$BASE_IMAGE" python3 --version)"

if missing "$REDIS_IMAGE"; then
    docker build --build-arg BASE="$BASE_IMAGE" -t "$REDIS_IMAGE" \
        -f "$HERE/redis.Dockerfile" "$HERE" >/tmp/transqueue-redis-build.log 2>&1 \
        || { tail -20 /tmp/transqueue-redis-build.log; exit 1; }
fi
echo "redis: $REDIS_IMAGE, $(docker run --rm "$REDIS_IMAGE" redis-server --version | cut -d' ' -f1-3)"
