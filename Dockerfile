FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY . .
ENV HOST=0.0.0.0 PORT=8080
USER node
EXPOSE 8080
# The service itself is PID 1: SIGTERM reaches its handler directly (no npx or tsx process relaying it).
CMD ["node", "--import=tsx", "src/main.ts"]
