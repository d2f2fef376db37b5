FROM node:20-bookworm-slim
WORKDIR /app
COPY package.json package-lock.json ./
RUN npm ci --omit=dev
COPY . .
ENV HOST=0.0.0.0 PORT=8080
USER node
EXPOSE 8080
CMD ["npx", "tsx", "src/main.ts"]
