# ipvsync node proxy image: a privileged, host-network container that programs the node's
# IPVS, addresses, nftables and conntrack over netlink. Build from the repository root:
#   docker build -t ipvsync:dev .
# Node 20 (the project's engine; @kubernetes/client-node 1.4.x). The native addon is compiled in
# the build stage against the same Node ABI and copied to build/Release where src/native.ts
# looks for it.

FROM node:20-bookworm-slim AS build
RUN apt-get update \
 && apt-get install -y --no-install-recommends python3 make g++ \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY package.json package-lock.json binding.gyp CMakeLists.txt tsconfig.json ./
COPY native ./native
COPY scripts ./scripts
COPY src ./src
COPY test ./test
# `npm ci` runs the install script (node-gyp rebuild); the TypeScript is compiled here. The
# daemon reads the Kubernetes API: @kubernetes/client-node, an optional peer dependency of the
# package (a development one of the repository), becomes a production dependency before the
# development ones are pruned.
RUN npm ci \
 && npx node-gyp rebuild -j 2 \
 && npx tsc -p . \
 && npm pkg delete 'devDependencies.@kubernetes/client-node' \
 && npm pkg set "dependencies.@kubernetes/client-node=$(npm pkg get 'peerDependencies.@kubernetes/client-node' | tr -d '"')" \
 && npm prune --omit=dev

FROM node:20-bookworm-slim
LABEL org.opencontainers.image.title="ipvsync" \
      org.opencontainers.image.description="kube-proxy IPVS-mode compatible service proxy over netlink"
WORKDIR /opt/ipvsync
COPY --from=build /src/package.json ./package.json
COPY --from=build /src/node_modules ./node_modules
COPY --from=build /src/dist/src ./dist/src
COPY --from=build /src/build/Release/ipvsync.node ./build/Release/ipvsync.node
# No shell tools are needed at run time: everything goes over netlink. Runs as root in a
# privileged pod (CAP_NET_ADMIN in the host network namespace); the preflight says so otherwise.
ENV NODE_ENV=production
# The command's shebang sets the same (src/cli/main.ts says why).
ENV MALLOC_ARENA_MAX=2
ENV MALLOC_MMAP_THRESHOLD_=131072
ENV MALLOC_TRIM_THRESHOLD_=131072
ENTRYPOINT ["node", "--max-semi-space-size=1", "--v8-pool-size=1", "--heap-growing-percent=20", "--no-memory-reducer", "/opt/ipvsync/dist/src/cli/main.js"]
CMD ["proxy", "--config", "/etc/ipvsync/config.yaml"]
