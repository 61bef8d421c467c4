FROM node:22-bookworm-slim
ENV NODE_OPTIONS=--max-old-space-size=768
WORKDIR /app
COPY server.js .
CMD ["node", "server.js"]
