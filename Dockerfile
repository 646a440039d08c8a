# backfill's image, for a Docker engine (docker build -t backfill:VERSION
# --build-arg VERSION=VERSION .). `make image` builds the same image
# without one (deploy/image): one layer over an empty base with the static
# binary, CA certificates and the non-root user 65532.
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION} AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
ARG VERSION=devel
RUN CGO_ENABLED=0 go build -trimpath -ldflags "-X main.version=${VERSION}" -o /rootfs/usr/local/bin/backfill ./cmd/backfill
RUN mkdir -p /rootfs/etc/ssl/certs /rootfs/tmp /rootfs/home/backfill \
 && cp /etc/ssl/certs/ca-certificates.crt /rootfs/etc/ssl/certs/ \
 && printf 'root:x:0:0:root:/root:/sbin/nologin\nbackfill:x:65532:65532:backfill:/home/backfill:/sbin/nologin\n' > /rootfs/etc/passwd \
 && printf 'root:x:0:\nbackfill:x:65532:\n' > /rootfs/etc/group \
 && chmod 1777 /rootfs/tmp && chown 65532:65532 /rootfs/home/backfill && chmod 700 /rootfs/home/backfill

FROM scratch
COPY --from=build /rootfs/ /
USER 65532:65532
WORKDIR /home/backfill
ENV PATH=/usr/local/bin:/usr/bin:/bin HOME=/home/backfill SSL_CERT_FILE=/etc/ssl/certs/ca-certificates.crt
ARG VERSION=devel
LABEL org.opencontainers.image.title=backfill \
      org.opencontainers.image.version=${VERSION}
ENTRYPOINT ["/usr/local/bin/backfill"]
