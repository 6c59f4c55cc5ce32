# The ahead container image: the static linux binary and nothing else.
#
#   CGO_ENABLED=0 GOOS=linux go build -trimpath -ldflags "-s -w -X main.version=$(git describe --tags --always)" -o ahead ./cmd/ahead
#   docker build -t ahead .
#   docker run --rm -p 7777:7777 -v "$PWD:/etc/ahead" ahead serve --config /etc/ahead/ahead.yaml --listen 0.0.0.0:7777
#
# FROM scratch: no shell, no libc, no package manager (ahead needs none).
# MCP servers started by a command (npx, uvx) are not in the image: use
# MCP servers over HTTP (url:) from it, or build on an image that has their
# runtime. Listening beyond loopback needs auth_token_env or --insecure.
FROM scratch
COPY ahead /ahead
# CA certificates for https backends and model APIs come from the host at
# run time (-v /etc/ssl/certs:/etc/ssl/certs:ro), so the image holds only
# the binary.
USER 65534:65534
EXPOSE 7777
ENTRYPOINT ["/ahead"]
CMD ["serve", "--config", "/etc/ahead/ahead.yaml", "--listen", "0.0.0.0:7777"]
