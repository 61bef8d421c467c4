FROM node:22-bookworm AS build
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev

FROM node:22-bookworm-slim AS runtime
RUN apt-get update && apt-get install -y --no-install-recommends libjemalloc2
WORKDIR /app
COPY --from=build /app/node_modules ./node_modules
COPY server.js .
CMD ["node", "server.js"]
