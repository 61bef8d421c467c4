FROM debian:12
RUN apt-get update && apt-get install -y --no-install-recommends openjdk-17-jre-headless && rm -rf /var/lib/apt/lists/*
ENV JAVA_HOME=/usr/lib/jvm/java-17-openjdk-amd64 JAVA_OPTS=-Dapp.env=prod GRADLE_OPTS=-Xmx512m
COPY build/install/demo /opt/demo
ENTRYPOINT ["/opt/demo/bin/demo"]
CMD ["serve"]
