FROM debian:12
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless && rm -rf /var/lib/apt/lists/*
ENV JAVA_TOOL_OPTIONS=-XX:+UseCGroupMemoryLimitForHeap
COPY app.jar /app/
CMD ["java", "-jar", "/app/app.jar"]
