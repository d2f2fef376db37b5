FROM node:22-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY . .
ENV HOST=0.0.0.0 PORT=8080
# The data folder (generated keys and secrets, unless given by the environment) belongs to the user the service runs as.
RUN mkdir -p /app/.data && chown node:node /app/.data
USER node
EXPOSE 8080
# The service itself is PID 1: SIGTERM reaches its handler directly (no npx or tsx process relaying it).
CMD ["node", "--import=tsx", "src/main.ts"]
