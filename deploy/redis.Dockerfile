# Redis for the compose stack where the public redis:7 image cannot be pulled: Debian's
# redis-server (7.0) on the local base image (deploy/base-image.sh builds both).
ARG BASE=transqueue-base:bookworm
FROM ${BASE}
RUN apt-get update \
 && apt-get install -y --no-install-recommends redis-server \
 && apt-get clean && rm -rf /var/lib/apt/lists/* \
 && install -d -o redis -g redis /data
USER redis
WORKDIR /data
EXPOSE 6379
CMD ["redis-server", "--dir", "/data"]
