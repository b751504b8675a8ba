# The operator image: `docker build -t ghcr.io/frontier-dev/frontier-operator:0.1.0 .`
FROM python:3.11-slim AS build
WORKDIR /src
COPY pyproject.toml README.md ./
COPY operator ./operator
RUN pip install --no-cache-dir --prefix=/install .

FROM python:3.11-slim
COPY --from=build /install /usr/local
# Non-root, no home, read-only root filesystem friendly (Python writes no bytecode at run time).
ENV PYTHONDONTWRITEBYTECODE=1 PYTHONUNBUFFERED=1
USER 65532:65532
ENTRYPOINT ["kopf"]
CMD ["run", "--all-namespaces", "--peering=frontier-operator", "-m", "frontier_operator.main"]
