# ipvsync node proxy image: a privileged, host-network container that programs the node's
# IPVS, addresses, nftables and conntrack over netlink. Build from the repository root:
#   docker build -t ipvsync:dev .
# On a machine without a registry, `npm run image` builds it on a local base image
# (scripts/image-base.sh) with --build-arg NODE_IMAGE=… (docs/releasing.md#the-node-image).
# Node 20 (the project's engine). The native addon is compiled once, by `npm ci`'s install
# script, against the base image's own Node headers, into build/Release where the addon loader
# looks for it.
ARG NODE_IMAGE=node:20-bookworm-slim

FROM ${NODE_IMAGE} AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
# What the install script needs first, so a change to the TypeScript alone reuses this layer.
COPY package.json package-lock.json binding.gyp CMakeLists.txt ./
COPY scripts/native-sources.cjs ./scripts/
COPY native ./native
# Node's headers from the image itself (official images ship them in /usr/local/include/node),
# not downloaded: the build needs no nodejs.org and matches the runtime's ABI exactly. No
# prebuilt addon is copied in, so the install script (node-gyp rebuild, or node-gyp-build
# falling back to it) compiles into build/Release.
RUN nodedir=$(dirname "$(dirname "$(command -v node)")") \
 && if [ -f "$nodedir/include/node/node_api.h" ]; then export npm_config_nodedir="$nodedir"; fi \
 && npm ci --no-audit --no-fund \
 && test -f build/Release/ipvsync.node
COPY tsconfig.json tsconfig.build.json ./
COPY src ./src
# The sources only (tsconfig.build.json: no tests, benchmarks or source maps).
# @kubernetes/client-node, an optional peer dependency of the package (a development one of the
# repository) that the daemon loads for a kubeconfig user with an exec plugin or an auth
# provider, becomes a production dependency before the development ones are pruned. Type
# declarations go too: the client lists @types/* as its dependencies (for its own .d.ts);
# nothing loads them at run time.
RUN npx tsc -p tsconfig.build.json \
 && chmod +x dist/src/cli/main.js \
 && npm pkg delete 'devDependencies.@kubernetes/client-node' \
 && npm pkg set "dependencies.@kubernetes/client-node=$(npm pkg get 'peerDependencies.@kubernetes/client-node' | tr -d '"')" \
 && npm prune --omit=dev --no-audit --no-fund \
 && find node_modules -depth -type d -name @types -exec rm -rf {} + \
 && node -e "require('@kubernetes/client-node')"

FROM ${NODE_IMAGE}
LABEL org.opencontainers.image.title="ipvsync" \
      org.opencontainers.image.description="kube-proxy compatible service proxy (IPVS or nftables) over netlink"
# ipvsync itself runs none of these (everything goes over netlink): they are the tools an
# operator expects in a kube-proxy image to look at a node's data plane from `kubectl exec`
# (nft, ip, ipset, ipvsadm, conntrack, lsmod/modprobe).
RUN apt-get update \
 && apt-get install -y --no-install-recommends nftables iproute2 ipset ipvsadm conntrack kmod \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /opt/ipvsync
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/build/Release/ipvsync.node ./build/Release/ipvsync.node
# Runs as root in a privileged pod (CAP_NET_ADMIN in the host network namespace); the
# preflight says so otherwise.
ENV NODE_ENV=production
# The command's shebang sets the same (src/cli/main.ts says why).
ENV MALLOC_ARENA_MAX=2
ENV MALLOC_MMAP_THRESHOLD_=131072
ENV MALLOC_TRIM_THRESHOLD_=131072
ENTRYPOINT ["node", "--max-semi-space-size=1", "--v8-pool-size=1", "--heap-growing-percent=20", "--no-memory-reducer", "/opt/ipvsync/dist/src/cli/main.js"]
CMD ["proxy", "--config", "/etc/ipvsync/config.yaml"]
