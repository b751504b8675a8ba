"""The HTTP face of the stand-in: routing, verbs, faults, the request log, and the threaded server.

kmock provides the HTTP server (`kmock.Server`, an aiohttp server on a free loopback port), request
parsing and recording, and the scaffold's Status-shaped 500 for unexpected errors (with the
traceback — useful when a test fails). Every Kubernetes API path is answered by `ApiRouter` from
the stand-in's own store; anything else falls through to kmock (its DSL reactions, then 404).

kmock 0.8's path parser crashes on `/api/v1/namespaces` and misreads `/api/v1/namespaces/<name>`
as a namespace prefix; `_install_path_parser_fix()` substitutes a correct parser for those paths
(kmock is pinned to 0.8 because this and `KubernetesScaffold._handle` are internals).
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import threading
import time
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import aiohttp.web
import attrs
import kmock
import yaml
from kmock._internal import parsing as kmock_parsing

from . import crds, discovery, errors
from .discovery import ResourceCatalog, ResourceType
from .faults import FaultInjector
from .requestlog import RequestInfo, RequestLog
from .selectors import parse_field_selector, parse_label_selector
from .store import APPLY_PATCH, ObjectRef, Store, seed_namespaces
from .watch import WatchFilter, WatchRegistry, stream_events

# ---------------------------------------------------------------------------- paths and verbs


@dataclass(frozen=True)
class ApiPath:
    """A parsed request path. `endpoint` is what it addresses."""

    endpoint: str  # root, version, health, api, apis, group, groupversion, resource, other
    group: str | None = None
    version: str | None = None
    plural: str | None = None
    namespace: str | None = None
    name: str | None = None
    subresource: str | None = None
    legacy_watch: bool = False  # the deprecated /watch/ path prefix


def parse_api_path(path: str) -> ApiPath:
    parts = [part for part in path.split("/") if part]
    if not parts:
        return ApiPath("root")
    if parts == ["version"]:
        return ApiPath("version")
    if parts[0] in ("healthz", "readyz", "livez"):
        return ApiPath("health")
    if parts[0] == "api":
        if len(parts) == 1:
            return ApiPath("api")
        group, version, rest = "", parts[1], parts[2:]
    elif parts[0] == "apis":
        if len(parts) == 1:
            return ApiPath("apis")
        if len(parts) == 2:
            return ApiPath("group", group=parts[1])
        group, version, rest = parts[1], parts[2], parts[3:]
    else:
        return ApiPath("other")
    if not rest:
        return ApiPath("groupversion", group=group, version=version)
    legacy_watch = rest[0] == "watch"
    rest = rest[1:] if legacy_watch else rest
    namespace = None
    if rest and rest[0] == "namespaces":
        # /api/v1/namespaces[/<name>[/status|/finalize]] addresses Namespace objects themselves.
        is_namespace_object = group == "" and (len(rest) <= 2 or (len(rest) == 3 and rest[2] in ("status", "finalize")))
        if not is_namespace_object:
            if len(rest) < 3:
                return ApiPath("other")
            namespace, rest = rest[1], rest[2:]
    if not rest:
        return ApiPath("other")
    return ApiPath(
        "resource",
        group=group,
        version=version,
        plural=rest[0],
        namespace=namespace,
        name=rest[1] if len(rest) > 1 else None,
        subresource="/".join(rest[2:]) or None,
        legacy_watch=legacy_watch,
    )


def api_verb(method: str, path: ApiPath, params: Mapping[str, str]) -> str:
    if path.endpoint != "resource":
        return "get" if method == "GET" else "other"
    watching = path.legacy_watch or params.get("watch") in ("true", "1")
    named = path.name is not None
    verbs = {
        ("GET", False): "watch" if watching else "list",
        ("GET", True): "watch" if watching else "get",
        ("POST", False): "create",
        ("PUT", True): "update",
        ("PATCH", True): "patch",
        ("DELETE", True): "delete",
        ("DELETE", False): "deletecollection",
    }
    return verbs.get((method, named), "other")


_original_parse_path = kmock_parsing.parse_path


def _parse_path_for_kmock(path: str) -> kmock_parsing.ParsedPath:
    parsed = parse_api_path(path)
    if parsed.endpoint == "resource":
        return kmock_parsing.ParsedPath(
            parsed.group, parsed.version, parsed.plural, parsed.namespace, parsed.name, parsed.subresource
        )
    try:
        return _original_parse_path(path)
    except ValueError:
        return kmock_parsing.ParsedPath()


def _install_path_parser_fix() -> None:
    kmock_parsing.parse_path = _parse_path_for_kmock


# ---------------------------------------------------------------------------- the API router


def _json(payload: Any, status: int = 200, headers: Mapping[str, str] | None = None) -> aiohttp.web.Response:
    return aiohttp.web.json_response(payload, status=status, headers=dict(headers or {}))


def _content_type(raw: aiohttp.web.BaseRequest) -> str:
    return raw.headers.get("Content-Type", "").split(";")[0].strip().lower()


def _parse_body(body: bytes, content_type: str) -> Any:
    if not body:
        return None
    try:
        if content_type == APPLY_PATCH:
            return yaml.safe_load(body)  # JSON is YAML too: clients send either
        return json.loads(body)
    except (ValueError, yaml.YAMLError) as error:
        raise errors.bad_request(f"couldn't get version/kind; json parse error: {error}") from error


class ApiRouter:
    """Serves every Kubernetes API path from the store."""

    def __init__(
        self,
        store: Store,
        catalog: ResourceCatalog,
        faults: FaultInjector,
        requests: RequestLog,
        watches: WatchRegistry,
        *,
        bookmark_interval: float,
    ) -> None:
        self.store, self.catalog, self.faults, self.requests, self.watches = store, catalog, faults, requests, watches
        self.bookmark_interval = bookmark_interval
        self.stopping: asyncio.Event | None = None
        self.server_address = ""
        # Pod logs by (namespace, pod name); the stand-in runs no container, tests write what one printed.
        self.pod_logs: dict[tuple[str, str], str] = {}

    async def handle(self, raw: aiohttp.web.BaseRequest, body: bytes) -> aiohttp.web.StreamResponse | None:
        path = parse_api_path(raw.path)
        if path.endpoint == "other":
            return None  # not the Kubernetes API: kmock's own reactions and 404
        params = dict(raw.query)
        info = RequestInfo(
            method=raw.method,
            path=raw.path,
            query=raw.query_string,
            verb=api_verb(raw.method, path, params),
            group=path.group,
            version=path.version,
            resource=path.plural,
            subresource=path.subresource,
            namespace=path.namespace,
            name=path.name,
            content_type=_content_type(raw),
            user_agent=raw.headers.get("User-Agent", ""),
        )
        started = time.monotonic()
        rule = self.faults.take(info)
        if rule is not None and rule.hang:
            await self._sleep(rule.hang)
        error = rule.error() if rule is not None else None
        try:
            if error is not None:
                raise error
            if info.verb == "watch":
                return await self._watch(raw, path, params, info, started)
            response = await self._serve(raw, path, params, info, body)
        except errors.ApiError as failure:
            response = _json(failure.status_body(), failure.code, failure.headers)
        self.requests.record(info, response.status, started)
        return response

    async def _sleep(self, seconds: float) -> None:
        assert self.stopping is not None
        with contextlib.suppress(TimeoutError):  # a hang ends early when the server stops
            await asyncio.wait_for(self.stopping.wait(), timeout=seconds)

    def _resource_type(self, path: ApiPath, info: RequestInfo) -> ResourceType:
        assert path.group is not None and path.version is not None and path.plural is not None
        resource_type = self.catalog.get(path.group, path.version, path.plural)
        if resource_type is None:
            raise errors.resource_not_found()
        if path.namespace is not None and not resource_type.namespaced:
            raise errors.resource_not_found()
        if path.subresource is not None and path.subresource not in resource_type.subresources:
            raise errors.resource_not_found()
        if path.subresource is None and info.verb not in resource_type.verbs:
            raise errors.method_not_allowed(info.verb)
        return resource_type

    async def _serve(
        self, raw: aiohttp.web.BaseRequest, path: ApiPath, params: dict[str, str], info: RequestInfo, body: bytes
    ) -> aiohttp.web.StreamResponse:
        if path.endpoint != "resource":
            return self._discovery(path)
        resource_type = self._resource_type(path, info)
        if path.subresource == "log" and path.plural == "pods" and info.verb == "get":
            return self._pod_log(resource_type, path)
        if path.subresource not in (None, "status"):
            raise errors.ApiError(404, "NotFound", f"the stand-in does not serve the {path.subresource} subresource")
        payload = _parse_body(body, info.content_type)
        dry_run = params.get("dryRun") == "All"
        store, namespace, name = self.store, path.namespace, path.name
        match info.verb:
            case "get":
                assert name is not None
                return _json(store.get(resource_type, namespace, name))
            case "list":
                return _json(self._list(resource_type, namespace, params))
            case "create":
                return _json(store.create(resource_type, namespace, payload, dry_run=dry_run), 201)
            case "update":
                assert name is not None
                return _json(
                    store.replace(
                        resource_type, namespace, name, payload, subresource=path.subresource, dry_run=dry_run
                    )
                )
            case "patch":
                assert name is not None
                patched, created = store.patch(
                    resource_type,
                    namespace,
                    name,
                    payload,
                    info.content_type,
                    subresource=path.subresource,
                    field_manager=params.get("fieldManager"),
                    force=params.get("force") in ("true", "1"),
                    dry_run=dry_run,
                )
                return _json(patched, 201 if created else 200)
            case "delete":
                assert name is not None
                options = payload if isinstance(payload, Mapping) else {}
                deleted, gone = store.delete(
                    resource_type, namespace, name, preconditions=options.get("preconditions"), dry_run=dry_run
                )
                if gone and not resource_type.custom:
                    # Built-in kinds answer an immediate deletion with a Status, custom resources with the object.
                    details = {
                        "name": name,
                        "group": resource_type.group,
                        "kind": resource_type.plural,
                        "uid": deleted["metadata"]["uid"],
                    }
                    return _json(
                        {"kind": "Status", "apiVersion": "v1", "metadata": {}, "status": "Success", "details": details}
                    )
                return _json(deleted)
            case "deletecollection":
                labels, fields = (
                    parse_label_selector(params.get("labelSelector")),
                    parse_field_selector(params.get("fieldSelector")),
                )
                items = store.delete_collection(resource_type, namespace, labels, fields)
                return _json(
                    {
                        "kind": f"{resource_type.kind}List",
                        "apiVersion": resource_type.api_version,
                        "metadata": {},
                        "items": items,
                    }
                )
        raise errors.method_not_allowed(info.verb)

    def _pod_log(self, resource_type: ResourceType, path: ApiPath) -> aiohttp.web.StreamResponse:
        """A pod's log: what a test (the benchmark Job runner, `jobs.py`) wrote for it, for an existing pod."""
        assert path.name is not None
        self.store.get(resource_type, path.namespace, path.name)  # 404 for a pod that does not exist
        text = self.pod_logs.get((path.namespace or "", path.name), "")
        return aiohttp.web.Response(text=text, content_type="text/plain")

    def _list(self, resource_type: ResourceType, namespace: str | None, params: Mapping[str, str]) -> dict[str, Any]:
        limit = int(params["limit"]) if params.get("limit", "").isdigit() and int(params["limit"]) > 0 else None
        items, version, token = self.store.list_objects(
            resource_type,
            namespace,
            parse_label_selector(params.get("labelSelector")),
            parse_field_selector(params.get("fieldSelector")),
            limit=limit,
            continue_token=params.get("continue") or None,
        )
        metadata: dict[str, Any] = {"resourceVersion": str(version)}
        if token:
            metadata["continue"] = token
        return {
            "kind": f"{resource_type.kind}List",
            "apiVersion": resource_type.api_version,
            "metadata": metadata,
            "items": items,
        }

    async def _watch(
        self, raw: aiohttp.web.BaseRequest, path: ApiPath, params: dict[str, str], info: RequestInfo, started: float
    ) -> aiohttp.web.StreamResponse:
        resource_type = self._resource_type(path, info)
        requested = params.get("resourceVersion") or ""
        if requested not in ("", "0") and not requested.isdigit():
            raise errors.bad_request(f"invalid resource version: {requested!r}")
        if params.get("sendInitialEvents") == "true" and (
            params.get("allowWatchBookmarks") != "true" or params.get("resourceVersionMatch") != "NotOlderThan"
        ):
            raise errors.ApiError(
                422,
                "Invalid",
                "sendInitialEvents requires allowWatchBookmarks=true and resourceVersionMatch=NotOlderThan",
            )
        wanted = WatchFilter(
            namespace=path.namespace,
            name=path.name,
            labels=parse_label_selector(params.get("labelSelector")),
            fields=parse_field_selector(params.get("fieldSelector")),
        )
        response = aiohttp.web.StreamResponse(status=200, headers={"Content-Type": "application/json"})
        response.enable_chunked_encoding()
        await response.prepare(raw)
        self.requests.record(info, 200, started)
        watch = self.watches.open(resource_type, path.namespace, params)

        def is_connected() -> bool:
            return raw.transport is not None and not raw.transport.is_closing()

        try:
            async for event in stream_events(
                self.store, watch, wanted, bookmark_interval=self.bookmark_interval, is_connected=is_connected
            ):
                await response.write(json.dumps(event).encode() + b"\n")
                watch.events_sent += 1
            if watch.abort and raw.transport is not None:
                raw.transport.close()  # a dropped connection, not a clean end of stream
                return response
            await response.write_eof()
        except ConnectionError:
            pass  # the client went away
        finally:
            self.watches.close(watch)
        return response

    def _discovery(self, path: ApiPath) -> aiohttp.web.StreamResponse:
        match path.endpoint:
            case "root":
                paths = ["/api", "/api/v1", "/apis", "/healthz", "/livez", "/readyz", "/version"]
                for group, versions in self.catalog.group_versions().items():
                    paths += [f"/apis/{group}"] + [f"/apis/{group}/{version}" for version in versions]
                return _json({"paths": sorted(paths)})
            case "version":
                return _json(dict(discovery.SERVER_VERSION))
            case "health":
                return aiohttp.web.Response(text="ok")
            case "api":
                return _json(discovery.api_versions_document(self.server_address))
            case "apis":
                return _json(discovery.api_group_list_document(self.catalog))
            case "group":
                versions = self.catalog.group_versions().get(path.group or "") or []
                if not versions:
                    raise errors.resource_not_found()
                return _json(discovery.api_group_document(path.group or "", versions))
            case _:
                document = discovery.api_resource_list_document(self.catalog, path.group or "", path.version or "")
                if document is None:
                    raise errors.resource_not_found()
                return _json(document)


_BINARY_CONTENT_TYPES = frozenset(
    {"application/vnd.kubernetes.protobuf", "application/cbor", "application/apply-patch+cbor"}
)


@attrs.define(kw_only=True)
class KMockStandIn(kmock.KubernetesScaffold):
    """kmock's Kubernetes scaffold with the API answered by the stand-in's router."""

    router: ApiRouter | None = None

    async def __call__(self, raw_request: aiohttp.web.BaseRequest) -> aiohttp.web.StreamResponse:
        # kmock decodes every body as text before routing; binary encodings (protobuf, CBOR — what
        # kubectl sends for built-in kinds) would crash it, so they are refused here as 415.
        content_type = _content_type(raw_request)
        if content_type in _BINARY_CONTENT_TYPES:
            await raw_request.read()
            failure = errors.unsupported_media_type(content_type, ["application/json", "application/yaml"])
            return _json(failure.status_body(), failure.code)
        return await super().__call__(raw_request)

    async def _handle(self, request: kmock.Request) -> aiohttp.web.StreamResponse:
        raw = request._raw_request
        if self.router is not None and raw is not None:
            response = await self.router.handle(raw, request.body)
            if response is not None:
                return response
        return await super()._handle(request)


# ---------------------------------------------------------------------------- the threaded server

DEFAULT_NAMESPACES = ("default", "kube-system", "kube-public", "kube-node-lease")


class StandIn:
    """The stand-in API server in a background thread (own event loop) on a free loopback port.

        with StandIn() as api:
            api.write_kubeconfig(tmp_path / "kubeconfig")
            ...

    `store`, `faults`, `requests` and `watches` are thread-safe; use them from tests directly.
    """

    def __init__(
        self,
        *,
        host: str = "127.0.0.1",
        port: int | None = None,
        namespaces: Iterable[str] = DEFAULT_NAMESPACES,
        crds: Iterable[Mapping[str, Any]] = (),
        bookmark_interval: float = 5.0,
    ) -> None:
        _install_path_parser_fix()
        self.host, self.port = host, port
        self.catalog = ResourceCatalog(discovery.builtin_types())
        self.store = Store(self.catalog)
        self.faults = FaultInjector()
        self.requests = RequestLog()
        self.watches = WatchRegistry()
        self.router = ApiRouter(
            self.store, self.catalog, self.faults, self.requests, self.watches, bookmark_interval=bookmark_interval
        )
        seed_namespaces(self.store, self.catalog, namespaces)
        for crd in crds:
            self.register_crd(crd)
        # What `reset()` returns to: the seeded namespaces and CRDs.
        self._baseline = self.store.uids()
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._ready = threading.Event()
        self._thread: threading.Thread | None = None
        self._failure: BaseException | None = None
        self.url = ""

    # ------------------------------------------------------------------------ lifecycle

    def start(self) -> StandIn:
        self._thread = threading.Thread(target=self._run, name="k8s-standin", daemon=True)
        self._thread.start()
        if not self._ready.wait(timeout=30) or self._failure is not None:
            raise RuntimeError(f"the Kubernetes API stand-in did not start: {self._failure!r}")
        return self

    def stop(self) -> None:
        if self._loop is not None and self._stopping is not None and self._thread is not None:
            self.watches.disconnect()
            self._loop.call_soon_threadsafe(self._stopping.set)
            self._thread.join(timeout=15)

    def __enter__(self) -> StandIn:
        return self.start()

    def __exit__(self, *exc_info: object) -> None:
        self.stop()

    def _run(self) -> None:
        try:
            asyncio.run(self._serve())
        except BaseException as failure:  # surfaced by start()
            self._failure = failure
            self._ready.set()

    async def _serve(self) -> None:
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self.router.stopping = self._stopping
        handler = KMockStandIn(router=self.router)
        async with handler, kmock.Server(handler, host=self.host, port=self.port) as server:
            self.url = f"http://{server.host}:{server.port}"
            self.router.server_address = f"{server.host}:{server.port}"
            self._ready.set()
            await self._stopping.wait()

    # ------------------------------------------------------------------------ conveniences

    def write_kubeconfig(self, path: Path, *, namespace: str = "default") -> Path:
        """A kubeconfig for kubectl, Kopf and the kubernetes client (plain HTTP, dummy token)."""
        config = {
            "apiVersion": "v1",
            "kind": "Config",
            "clusters": [{"name": "standin", "cluster": {"server": self.url}}],
            "users": [{"name": "standin", "user": {"token": "standin-token"}}],
            "contexts": [
                {"name": "standin", "context": {"cluster": "standin", "user": "standin", "namespace": namespace}}
            ],
            "current-context": "standin",
        }
        path.write_text(yaml.safe_dump(config), encoding="utf-8")
        return path

    def resource_type(self, api_version: str, plural: str) -> ResourceType:
        group, _, version = api_version.rpartition("/")
        resource_type = self.catalog.get(group, version, plural)
        if resource_type is None:
            raise KeyError(f"{plural} of {api_version} is not served")
        return resource_type

    def get(self, api_version: str, plural: str, namespace: str | None, name: str) -> dict[str, Any] | None:
        """White-box read of one object (None when absent)."""
        try:
            return self.store.get(self.resource_type(api_version, plural), namespace, name)
        except errors.ApiError:
            return None

    def register_crd(self, crd: Mapping[str, Any]) -> dict[str, Any]:
        """Create a CRD as `kubectl apply` would (AlreadyExists is fine)."""
        crd_type = self.resource_type("apiextensions.k8s.io/v1", "customresourcedefinitions")
        try:
            return self.store.create(crd_type, None, crd)
        except errors.ApiError as failure:
            if failure.reason != "AlreadyExists":
                raise
            return self.store.get(crd_type, None, crd["metadata"]["name"])

    def collect_garbage(self) -> list[ObjectRef]:
        return self.store.collect_garbage()

    def disconnect_watches(self, plural: str | None = None, *, abort: bool = False) -> int:
        return self.watches.disconnect(lambda w: plural is None or w.resource_type.plural == plural, abort=abort)

    def compact(self) -> int:
        """Expire the watch history and end every watch: clients resuming get 410 Gone and re-list."""
        version = self.store.compact()
        self.watches.disconnect()
        return version

    def reset(self) -> None:
        """Back to the freshly started state: seeded namespaces and CRDs only; no faults, no log."""
        self.watches.disconnect()
        self.store.reset(lambda obj: obj["metadata"]["uid"] in self._baseline)
        for crd in self.store.objects("apiextensions.k8s.io", "customresourcedefinitions"):
            for resource_type in crds.resource_types_of(crd):
                self.catalog.add(resource_type)
        self.faults.clear()
        self.requests.clear()
