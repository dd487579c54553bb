"""A real Kubernetes control plane on loopback, for integration tests and by hand.

The project's scheduler runs as a secondary scheduler against a real API server;
this module starts one from upstream binaries (built by ``test/cluster/build.sh``
from the published Go modules): etcd, kube-apiserver, kube-controller-manager and,
optionally, the stock kube-scheduler. There are no kubelets: Nodes are plain API
objects (see :func:`create_ready_node`).

Every component listens on 127.0.0.1 on a free port, keeps its state and log in
one work directory, and runs in its own process group so that stopping it also
stops anything it spawned. A control plane started from Python dies with the
Python process (``PR_SET_PDEATHSIG`` plus an ``atexit`` hook); one started with
``up`` from the command line outlives it and is stopped with ``down``::

    python tests/cluster/controlplane.py up --dir /tmp/cp     # prints the kubeconfig path
    KUBECONFIG=/tmp/cp/admin.kubeconfig kubectl get --raw /readyz
    python tests/cluster/controlplane.py down --dir /tmp/cp
"""

from __future__ import annotations

import argparse
import atexit
import contextlib
import ctypes
import datetime
import importlib
import ipaddress
import json
import os
import shutil
import signal
import socket
import ssl
import subprocess
import sys
import time
import urllib.error
import urllib.request
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[2]
BUILD_SCRIPT = REPO_ROOT / "test" / "cluster" / "build.sh"

#: The binaries build.sh produces, in start order.
BINARIES = ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler")

#: Feature gates passed to every Kubernetes component. In 1.37 DRA itself is GA and
#: on; these are the DRA extensions the project models, named explicitly (they are
#: on by default at 1.37 too) so that a version bump which flips a default fails loudly
#: at start instead of silently changing what the tests exercise.
DEFAULT_FEATURE_GATES: Mapping[str, bool] = {
    "DRAConsumableCapacity": True,
    "DRADeviceTaints": True,
    "DRAPartitionableDevices": True,
}

#: Controllers run by kube-controller-manager: everything except the node lifecycle
#: controller, which would mark every kubelet-less Node NotReady and taint it.
DEFAULT_CONTROLLERS = "*,-node-lifecycle-controller"

SERVICE_CIDR = "10.0.0.0/24"
SERVICE_ACCOUNT_ISSUER = "https://kubernetes.default.svc.cluster.local"
STATE_FILE = "state.json"
#: The client picks JSON Patch for PATCH bodies unless told otherwise; helpers send merge patches.
MERGE_PATCH = "application/merge-patch+json"
ADMIN_KUBECONFIG = "admin.kubeconfig"

_PR_SET_PDEATHSIG = 1


class ControlPlaneError(RuntimeError):
    """The control plane could not be built, started, reached or stopped."""


class GoNotFoundError(ControlPlaneError):
    """``go`` is not on PATH, so the control-plane binaries cannot be built."""


#: What the harness imports beyond the project's runtime dependencies (module -> why);
#: all of it comes with the dev extras.
DEV_MODULES: Mapping[str, str] = {"cryptography": "the control plane's certificates"}


def require_dev_modules() -> None:
    """Fail with one line naming the first missing package, before anything is built or started."""
    for module, purpose in DEV_MODULES.items():
        try:
            importlib.import_module(module)
        except ImportError:
            raise ControlPlaneError(
                f"the Python package '{module}' is missing ({purpose}); it is a dev extra of "
                "this project: pip install -e '.[dev]'"
            ) from None


# --------------------------------------------------------------------------- build


def build_binaries(*, env: Mapping[str, str] | None = None, script: Path = BUILD_SCRIPT) -> Path:
    """Run build.sh (a no-op when its version-keyed cache is filled) and return the bin dir.

    Raises GoNotFoundError when go is missing, ControlPlaneError when the build fails
    (with the tail of its output, so a failure in CI is diagnosable from the test log).
    """
    run_env = dict(os.environ if env is None else env)
    if shutil.which("go", path=run_env.get("PATH")) is None:
        raise GoNotFoundError(
            "'go' is not on PATH: the control plane is built from upstream Go modules "
            f"by {script.relative_to(REPO_ROOT) if script.is_relative_to(REPO_ROOT) else script}"
        )
    proc = subprocess.run(
        ["bash", str(script)], env=run_env, capture_output=True, text=True, check=False
    )
    if proc.returncode != 0:
        tail = "\n".join((proc.stdout + proc.stderr).splitlines()[-40:])
        raise ControlPlaneError(f"{script} failed with exit code {proc.returncode}:\n{tail}")
    lines = proc.stdout.strip().splitlines()
    if not lines:
        raise ControlPlaneError(f"{script} printed no bin directory")
    bin_dir = Path(lines[-1])
    check_bin_dir(bin_dir)
    return bin_dir


def check_bin_dir(bin_dir: Path) -> None:
    """Fail with the missing names if bin_dir lacks an executable control-plane binary."""
    missing = [b for b in BINARIES if not os.access(bin_dir / b, os.X_OK)]
    if missing:
        raise ControlPlaneError(f"{bin_dir}: missing executable(s) {', '.join(missing)}")


# --------------------------------------------------------------------------- PKI


@dataclass(frozen=True)
class Pki:
    """Paths of the certificates and keys of one control plane (all PEM)."""

    dir: Path

    @property
    def ca_cert(self) -> Path:
        return self.dir / "ca.crt"

    @property
    def ca_key(self) -> Path:
        return self.dir / "ca.key"

    @property
    def serving_cert(self) -> Path:
        return self.dir / "apiserver.crt"

    @property
    def serving_key(self) -> Path:
        return self.dir / "apiserver.key"

    @property
    def sa_key(self) -> Path:
        return self.dir / "sa.key"

    @property
    def sa_pub(self) -> Path:
        return self.dir / "sa.pub"

    def client_cert(self, user: str) -> Path:
        return self.dir / f"{user}.crt"

    def client_key(self, user: str) -> Path:
        return self.dir / f"{user}.key"


#: Client identities: file stem -> (common name = user, organisation = group).
#: All are in system:masters: kube-controller-manager runs with
#: --use-service-account-credentials=false, so its one identity needs every right
#: its controllers need; distinct user names keep the audit trail readable.
CLIENTS: Mapping[str, tuple[str, str]] = {
    "admin": ("dra-affinity-admin", "system:masters"),
    "kube-controller-manager": ("system:kube-controller-manager", "system:masters"),
    "kube-scheduler": ("system:kube-scheduler", "system:masters"),
}


def generate_pki(directory: Path, *, hosts: Sequence[str] = ("127.0.0.1", "localhost")) -> Pki:
    """Create a CA, the API server's serving cert, the service-account key pair and client certs.

    Keys are ECDSA P-256 (fast to generate, accepted everywhere Kubernetes takes a
    key). The serving cert names loopback and the in-cluster service names.
    """
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec
    from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

    directory.mkdir(parents=True, exist_ok=True)
    pki = Pki(directory)
    now = datetime.datetime.now(datetime.UTC)
    not_before = now - datetime.timedelta(hours=1)
    not_after = now + datetime.timedelta(days=30)

    def new_key() -> ec.EllipticCurvePrivateKey:
        return ec.generate_private_key(ec.SECP256R1())

    def write_key(path: Path, key: ec.EllipticCurvePrivateKey) -> None:
        path.write_bytes(
            key.private_bytes(
                serialization.Encoding.PEM,
                serialization.PrivateFormat.TraditionalOpenSSL,
                serialization.NoEncryption(),
            )
        )
        path.chmod(0o600)

    def name(cn: str, org: str | None = None) -> x509.Name:
        attrs = [x509.NameAttribute(NameOID.COMMON_NAME, cn)]
        if org is not None:
            attrs.insert(0, x509.NameAttribute(NameOID.ORGANIZATION_NAME, org))
        return x509.Name(attrs)

    ca_key = new_key()
    ca_name = name("dra-affinity-test-ca")
    ca_cert = (
        x509.CertificateBuilder()
        .subject_name(ca_name)
        .issuer_name(ca_name)
        .public_key(ca_key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(not_before)
        .not_valid_after(not_after)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), critical=True)
        .add_extension(
            x509.KeyUsage(
                digital_signature=True,
                content_commitment=False,
                key_encipherment=False,
                data_encipherment=False,
                key_agreement=False,
                key_cert_sign=True,
                crl_sign=True,
                encipher_only=False,
                decipher_only=False,
            ),
            critical=True,
        )
        .add_extension(
            x509.SubjectKeyIdentifier.from_public_key(ca_key.public_key()), critical=False
        )
        .sign(ca_key, hashes.SHA256())
    )
    write_key(pki.ca_key, ca_key)
    pki.ca_cert.write_bytes(ca_cert.public_bytes(serialization.Encoding.PEM))

    def issue(
        path_cert: Path,
        path_key: Path,
        subject: x509.Name,
        usage: x509.ObjectIdentifier,
        sans: list[x509.GeneralName] | None = None,
    ) -> None:
        key = new_key()
        builder = (
            x509.CertificateBuilder()
            .subject_name(subject)
            .issuer_name(ca_name)
            .public_key(key.public_key())
            .serial_number(x509.random_serial_number())
            .not_valid_before(not_before)
            .not_valid_after(not_after)
            .add_extension(x509.BasicConstraints(ca=False, path_length=None), critical=True)
            .add_extension(x509.ExtendedKeyUsage([usage]), critical=False)
            .add_extension(
                x509.AuthorityKeyIdentifier.from_issuer_public_key(ca_key.public_key()),
                critical=False,
            )
        )
        if sans:
            builder = builder.add_extension(x509.SubjectAlternativeName(sans), critical=False)
        cert = builder.sign(ca_key, hashes.SHA256())
        write_key(path_key, key)
        path_cert.write_bytes(cert.public_bytes(serialization.Encoding.PEM))

    sans: list[x509.GeneralName] = []
    for host in (
        *hosts,
        "kubernetes",
        "kubernetes.default",
        "kubernetes.default.svc",
        "kubernetes.default.svc.cluster.local",
        str(next(ipaddress.ip_network(SERVICE_CIDR).hosts())),
    ):
        try:
            sans.append(x509.IPAddress(ipaddress.ip_address(host)))
        except ValueError:
            sans.append(x509.DNSName(host))
    issue(
        pki.serving_cert,
        pki.serving_key,
        name("kube-apiserver"),
        ExtendedKeyUsageOID.SERVER_AUTH,
        sans,
    )
    for stem, (user, group) in CLIENTS.items():
        issue(
            pki.client_cert(stem),
            pki.client_key(stem),
            name(user, group),
            ExtendedKeyUsageOID.CLIENT_AUTH,
        )

    sa_key = new_key()
    write_key(pki.sa_key, sa_key)
    pki.sa_pub.write_bytes(
        sa_key.public_key().public_bytes(
            serialization.Encoding.PEM, serialization.PublicFormat.SubjectPublicKeyInfo
        )
    )
    return pki


def write_kubeconfig(path: Path, server: str, pki: Pki, user: str) -> Path:
    """Write a kubeconfig for ``user`` (a key of CLIENTS) with absolute certificate paths."""
    if user not in CLIENTS:
        raise ControlPlaneError(f"kubeconfig: unknown user {user!r} (known: {', '.join(CLIENTS)})")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "dra-affinity",
                "cluster": {"server": server, "certificate-authority": str(pki.ca_cert)},
            }
        ],
        "users": [
            {
                "name": user,
                "user": {
                    "client-certificate": str(pki.client_cert(user)),
                    "client-key": str(pki.client_key(user)),
                },
            }
        ],
        "contexts": [
            {"name": "dra-affinity", "context": {"cluster": "dra-affinity", "user": user}}
        ],
        "current-context": "dra-affinity",
        "preferences": {},
    }
    path.write_text(yaml.safe_dump(config, sort_keys=True))
    path.chmod(0o600)
    return path


# --------------------------------------------------------------------------- processes


#: Start-ups tried on fresh ports when a component finds its port taken.
PORT_ATTEMPTS = 3
#: How a component says its port was taken (the Go runtime's bind error).
PORT_TAKEN = "address already in use"


def free_port() -> int:
    """A TCP port on 127.0.0.1 that nothing listens on right now."""
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def _die_with_parent() -> None:
    """preexec hook: have the kernel SIGKILL the child when the parent dies."""
    libc = ctypes.CDLL(None, use_errno=True)
    libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)


@dataclass
class Component:
    """One started binary: its command line, its log and its process."""

    name: str
    argv: list[str]
    log: Path
    process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int | None:
        return None if self.process is None else self.process.pid

    def start(self, *, tie_to_parent: bool) -> None:
        with self.log.open("ab") as log:
            self.process = subprocess.Popen(
                self.argv,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                start_new_session=True,
                preexec_fn=_die_with_parent if tie_to_parent else None,
            )

    def exited(self) -> int | None:
        """The exit code if the process has ended, else None."""
        return None if self.process is None else self.process.poll()

    def log_tail(self, lines: int = 30) -> str:
        try:
            return "\n".join(self.log.read_text(errors="replace").splitlines()[-lines:])
        except OSError:
            return "(no log)"

    def stop(self, grace: float) -> None:
        """SIGTERM the process group, SIGKILL it after ``grace`` seconds, reap the process."""
        if self.process is None:
            return
        _terminate_group(
            self.process.pid, grace, lambda: self.process is None or self.process.poll() is not None
        )
        with contextlib.suppress(subprocess.TimeoutExpired):
            self.process.wait(timeout=grace)


def _signal_group(pgid: int, sig: signal.Signals) -> None:
    with contextlib.suppress(ProcessLookupError, PermissionError):
        os.killpg(pgid, sig)


def group_members(pgid: int) -> list[int]:
    """Live (non-zombie) processes in process group ``pgid``, from /proc.

    A zombie has finished and only waits for its parent (often init) to reap it,
    so it does not count as left behind.
    """
    members = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        fields = stat.rsplit(") ", 1)[1].split()
        if int(fields[2]) == pgid and fields[0] != "Z":
            members.append(int(entry.name))
    return sorted(members)


def _group_alive(pgid: int) -> bool:
    return bool(group_members(pgid))


def _terminate_group(pgid: int, grace: float, leader_gone: Callable[[], bool]) -> None:
    """Stop a process group: SIGTERM, wait up to ``grace`` s, then SIGKILL the rest."""
    _signal_group(pgid, signal.SIGTERM)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline:
        if leader_gone() and not _group_alive(pgid):
            return
        time.sleep(0.05)
    _signal_group(pgid, signal.SIGKILL)
    deadline = time.monotonic() + grace
    while time.monotonic() < deadline and _group_alive(pgid):
        leader_gone()  # reaps a child leader so the group can disappear
        time.sleep(0.05)


def _ssl_context(pki: Pki | None, *, client: str | None = "admin") -> ssl.SSLContext:
    if pki is None:
        ctx = ssl.create_default_context()
        ctx.check_hostname = False
        ctx.verify_mode = ssl.CERT_NONE
        return ctx
    ctx = ssl.create_default_context(cafile=str(pki.ca_cert))
    if client is not None:
        ctx.load_cert_chain(str(pki.client_cert(client)), str(pki.client_key(client)))
    return ctx


def _probe(url: str, ctx: ssl.SSLContext | None, expect: Callable[[bytes], bool]) -> bool:
    try:
        with urllib.request.urlopen(url, context=ctx, timeout=2) as resp:
            return bool(resp.status == 200 and expect(resp.read()))
    except (urllib.error.URLError, OSError, ValueError):
        return False


# --------------------------------------------------------------------------- control plane


@dataclass
class ControlPlane:
    """etcd + kube-apiserver + kube-controller-manager (+ kube-scheduler) in ``workdir``.

    Use as a context manager or call :meth:`start` / :meth:`stop`. ``stop`` is
    idempotent and also runs at interpreter exit. With ``tie_to_parent`` (the
    default) the kernel kills the components if this Python process dies without
    running its exit hooks; ``up`` turns that off so the control plane outlives it.
    """

    workdir: Path
    bin_dir: Path
    with_scheduler: bool = False
    feature_gates: Mapping[str, bool] = field(default_factory=lambda: dict(DEFAULT_FEATURE_GATES))
    controllers: str = DEFAULT_CONTROLLERS
    extra_args: Mapping[str, Sequence[str]] = field(default_factory=dict)
    tie_to_parent: bool = True
    start_timeout: float = 120.0
    stop_grace: float = 10.0
    components: list[Component] = field(default_factory=list, init=False)
    ports: dict[str, int] = field(default_factory=dict, init=False)
    pki: Pki | None = field(default=None, init=False)
    started_seconds: float | None = field(default=None, init=False)

    # ---- public surface

    @property
    def kubeconfig(self) -> Path:
        """Admin (system:masters) kubeconfig for tests and users."""
        return self.workdir / ADMIN_KUBECONFIG

    @property
    def server(self) -> str:
        return f"https://127.0.0.1:{self.ports['kube-apiserver']}"

    def __enter__(self) -> ControlPlane:
        self.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self.stop()

    def start(self) -> None:
        """Start every component and wait until each is ready; on failure stop what started."""
        if self.components:
            raise ControlPlaneError(f"{self.workdir}: control plane already started")
        require_dev_modules()
        check_bin_dir(self.bin_dir)
        unknown = sorted(set(self.extra_args) - set(BINARIES))
        if unknown:
            raise ControlPlaneError(f"extra_args: unknown component(s) {', '.join(unknown)}")
        begin = time.monotonic()
        self.workdir.mkdir(parents=True, exist_ok=True)
        (self.workdir / "logs").mkdir(exist_ok=True)
        self.pki = generate_pki(self.workdir / "pki")
        for attempt in range(1, PORT_ATTEMPTS + 1):
            try:
                self._start_on_free_ports()
                break
            except ControlPlaneError as e:
                # A port found free was taken before its component bound it (another
                # process's outgoing connection can get it): start over on new ports.
                if PORT_TAKEN not in str(e) or attempt == PORT_ATTEMPTS:
                    raise
                shutil.rmtree(self.workdir / "etcd", ignore_errors=True)
        self.started_seconds = time.monotonic() - begin

    def _start_on_free_ports(self) -> None:
        """Pick ports, write the kubeconfigs for them and start every component; on
        failure stop what started."""
        assert self.pki is not None
        self.ports = {
            "etcd": free_port(),
            "etcd-peer": free_port(),
            "kube-apiserver": free_port(),
            "kube-controller-manager": free_port(),
            "kube-scheduler": free_port(),
        }
        for user in CLIENTS:
            write_kubeconfig(self._kubeconfig_for(user), self.server, self.pki, user)
        atexit.register(self.stop)
        try:
            self._start_component("etcd", self._etcd_args(), self._etcd_ready)
            self._start_component("kube-apiserver", self._apiserver_args(), self._apiserver_ready)
            self._start_component(
                "kube-controller-manager",
                self._kcm_args(),
                self._component_healthy("kube-controller-manager"),
            )
            if self.with_scheduler:
                self._start_component(
                    "kube-scheduler",
                    self._scheduler_args(),
                    self._component_healthy("kube-scheduler"),
                )
            self._write_state()
        except BaseException:
            self.stop()
            raise

    def stop(self) -> None:
        """Stop the components in reverse start order (SIGTERM, then SIGKILL after the grace)."""
        for comp in reversed(self.components):
            comp.stop(self.stop_grace)
        self.components.clear()
        with contextlib.suppress(FileNotFoundError):
            (self.workdir / STATE_FILE).unlink()
        atexit.unregister(self.stop)

    def detach(self) -> None:
        """Let the components outlive this process (``up``): drop the exit hook."""
        atexit.unregister(self.stop)

    def pids(self) -> dict[str, int]:
        return {c.name: c.pid for c in self.components if c.pid is not None}

    def api_client(self) -> Any:
        """A fresh official ``kubernetes`` ApiClient authenticated as the admin."""
        from kubernetes import config

        return config.new_client_from_config(config_file=str(self.kubeconfig))  # type: ignore[no-untyped-call]

    # ---- internals

    def _kubeconfig_for(self, user: str) -> Path:
        return self.kubeconfig if user == "admin" else self.workdir / f"{user}.kubeconfig"

    def _gates(self) -> str:
        return ",".join(
            f"{k}={'true' if v else 'false'}" for k, v in sorted(self.feature_gates.items())
        )

    def _etcd_args(self) -> list[str]:
        client = f"http://127.0.0.1:{self.ports['etcd']}"
        peer = f"http://127.0.0.1:{self.ports['etcd-peer']}"
        return [
            "--name=default",
            f"--data-dir={self.workdir / 'etcd'}",
            f"--listen-client-urls={client}",
            f"--advertise-client-urls={client}",
            f"--listen-peer-urls={peer}",
            f"--initial-advertise-peer-urls={peer}",
            f"--initial-cluster=default={peer}",
            "--log-level=warn",
            # Test data is disposable: skip fsync, it dominates etcd latency on slow disks.
            "--unsafe-no-fsync=true",
        ]

    def _apiserver_args(self) -> list[str]:
        assert self.pki is not None
        pki = self.pki
        return [
            f"--etcd-servers=http://127.0.0.1:{self.ports['etcd']}",
            "--bind-address=127.0.0.1",
            "--advertise-address=127.0.0.1",
            # The kubernetes Service's endpoint cannot point at loopback; nothing here uses it.
            "--endpoint-reconciler-type=none",
            f"--secure-port={self.ports['kube-apiserver']}",
            f"--cert-dir={self.workdir / 'apiserver'}",
            f"--tls-cert-file={pki.serving_cert}",
            f"--tls-private-key-file={pki.serving_key}",
            f"--client-ca-file={pki.ca_cert}",
            f"--service-account-issuer={SERVICE_ACCOUNT_ISSUER}",
            f"--service-account-key-file={pki.sa_pub}",
            f"--service-account-signing-key-file={pki.sa_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            "--authorization-mode=Node,RBAC",
            "--runtime-config=resource.k8s.io/v1=true",
            f"--feature-gates={self._gates()}",
            "--profiling=false",
            "--v=1",
        ]

    def _kcm_args(self) -> list[str]:
        assert self.pki is not None
        kubeconfig = self._kubeconfig_for("kube-controller-manager")
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['kube-controller-manager']}",
            f"--cert-dir={self.workdir / 'kube-controller-manager'}",
            "--leader-elect=false",
            "--use-service-account-credentials=false",
            f"--controllers={self.controllers}",
            f"--service-account-private-key-file={self.pki.sa_key}",
            f"--root-ca-file={self.pki.ca_cert}",
            f"--cluster-signing-cert-file={self.pki.ca_cert}",
            f"--cluster-signing-key-file={self.pki.ca_key}",
            f"--service-cluster-ip-range={SERVICE_CIDR}",
            f"--feature-gates={self._gates()}",
            "--profiling=false",
            "--v=1",
        ]

    def _scheduler_args(self) -> list[str]:
        kubeconfig = self._kubeconfig_for("kube-scheduler")
        return [
            f"--kubeconfig={kubeconfig}",
            f"--authentication-kubeconfig={kubeconfig}",
            f"--authorization-kubeconfig={kubeconfig}",
            "--bind-address=127.0.0.1",
            f"--secure-port={self.ports['kube-scheduler']}",
            f"--cert-dir={self.workdir / 'kube-scheduler'}",
            "--leader-elect=false",
            f"--feature-gates={self._gates()}",
            "--profiling=false",
            "--v=1",
        ]

    def _etcd_ready(self) -> bool:
        return _probe(
            f"http://127.0.0.1:{self.ports['etcd']}/health",
            None,
            lambda body: json.loads(body).get("health") == "true",
        )

    def _apiserver_ready(self) -> bool:
        return _probe(
            f"{self.server}/readyz", _ssl_context(self.pki), lambda body: body.strip() == b"ok"
        )

    def _component_healthy(self, name: str) -> Callable[[], bool]:
        url = f"https://127.0.0.1:{self.ports[name]}/healthz"
        ctx = _ssl_context(None)  # self-signed serving cert generated by the component
        return lambda: _probe(url, ctx, lambda body: body.strip() == b"ok")

    def _start_component(self, name: str, args: list[str], ready: Callable[[], bool]) -> None:
        argv = [str(self.bin_dir / name), *args, *self.extra_args.get(name, ())]
        comp = Component(name, argv, self.workdir / "logs" / f"{name}.log")
        comp.start(tie_to_parent=self.tie_to_parent)
        self.components.append(comp)
        deadline = time.monotonic() + self.start_timeout
        while True:
            code = comp.exited()
            if code is not None:
                raise ControlPlaneError(
                    f"{name} exited with code {code} during start-up; last lines of {comp.log}:\n"
                    f"{comp.log_tail()}"
                )
            if ready():
                return
            if time.monotonic() > deadline:
                raise ControlPlaneError(
                    f"{name} not ready after {self.start_timeout:.0f} s; last lines of {comp.log}:\n"
                    f"{comp.log_tail()}"
                )
            time.sleep(0.1)

    def _write_state(self) -> None:
        state = {
            "kubeconfig": str(self.kubeconfig),
            "server": self.server,
            "components": [
                {"name": c.name, "pid": c.pid, "exe": c.argv[0], "log": str(c.log)}
                for c in self.components
            ],
        }
        (self.workdir / STATE_FILE).write_text(json.dumps(state, indent=2, sort_keys=True) + "\n")


# --------------------------------------------------------------------------- stop by state file


def _exe_of(pid: int) -> str | None:
    try:
        return os.readlink(f"/proc/{pid}/exe")
    except OSError:
        return None


def down(workdir: Path, *, grace: float = 10.0) -> list[str]:
    """Stop a control plane started by ``up`` in ``workdir``; returns the names it stopped.

    A recorded pid is only signalled while it still runs the recorded binary, so a
    pid reused by an unrelated process after a reboot is left alone.
    """
    state_path = workdir / STATE_FILE
    try:
        state = json.loads(state_path.read_text())
        components = state["components"]
        entries = [(str(c["name"]), int(c["pid"]), str(c["exe"])) for c in components]
    except FileNotFoundError:
        raise ControlPlaneError(
            f"{state_path}: no control plane recorded here (not started with 'up'?)"
        ) from None
    except (OSError, ValueError, KeyError, TypeError) as err:
        raise ControlPlaneError(f"{state_path}: unreadable state ({err})") from None
    stopped = []
    for name, pid, exe in reversed(entries):
        if _exe_of(pid) != exe:
            continue

        def leader_gone(pid: int = pid, exe: str = exe) -> bool:
            return _exe_of(pid) != exe

        _terminate_group(pid, grace, leader_gone)
        stopped.append(name)
    state_path.unlink()
    return stopped


# --------------------------------------------------------------------------- API helpers


def wait_for(
    predicate: Callable[[], Any], *, timeout: float = 60.0, what: str = "condition"
) -> Any:
    """Poll ``predicate`` until it returns something truthy; return it or raise after ``timeout``."""
    deadline = time.monotonic() + timeout
    while True:
        value = predicate()
        if value:
            return value
        if time.monotonic() > deadline:
            raise ControlPlaneError(f"timed out after {timeout:.0f} s waiting for {what}")
        time.sleep(0.1)


def create_namespace(api_client: Any, name: str, *, timeout: float = 60.0) -> None:
    """Create a namespace and wait for its ``default`` ServiceAccount.

    The ServiceAccount admission plugin rejects pods until the serviceaccount
    controller has created that account, so tests that create pods need the wait.
    """
    from kubernetes import client
    from kubernetes.client.exceptions import ApiException

    core = client.CoreV1Api(api_client)
    core.create_namespace(client.V1Namespace(metadata=client.V1ObjectMeta(name=name)))

    def has_default_sa() -> bool:
        try:
            core.read_namespaced_service_account("default", name)
        except ApiException as err:
            if err.status == 404:
                return False
            raise
        return True

    wait_for(has_default_sa, timeout=timeout, what=f"ServiceAccount {name}/default")


def create_ready_node(
    api_client: Any,
    name: str,
    *,
    labels: Mapping[str, str] | None = None,
    allocatable: Mapping[str, str] | None = None,
) -> Any:
    """Create a schedulable Node object, Ready through the status subresource, untainted.

    There is no kubelet: the object alone is what schedulers see. ``allocatable``
    defaults to a modest machine so the stock scheduler's resource fit passes.
    """
    from kubernetes import client

    core = client.CoreV1Api(api_client)
    resources = dict(allocatable or {"cpu": "8", "memory": "32Gi", "pods": "110"})
    node_labels = {"kubernetes.io/hostname": name, **(labels or {})}
    core.create_node(client.V1Node(metadata=client.V1ObjectMeta(name=name, labels=node_labels)))
    now = datetime.datetime.now(datetime.UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    status = {
        "status": {
            "capacity": resources,
            "allocatable": resources,
            "conditions": [
                {
                    "type": "Ready",
                    "status": "True",
                    "reason": "KubeletReady",
                    "message": "node object created by the test harness",
                    "lastHeartbeatTime": now,
                    "lastTransitionTime": now,
                }
            ],
        }
    }
    core.patch_node_status(name, status, _content_type=MERGE_PATCH)
    # Admission taints every new Node node.kubernetes.io/not-ready:NoSchedule; the node
    # lifecycle controller (not run here) would lift it once Ready. Lift it ourselves.
    return core.patch_node(name, {"spec": {"taints": None}}, _content_type=MERGE_PATCH)


def raw_request(
    api_client: Any,
    method: str,
    path: str,
    *,
    body: Any = None,
    query: Mapping[str, str] | None = None,
) -> tuple[int, dict[str, str], Any]:
    """Send one request through the official client's transport, without its typed models.

    The typed models drop fields they do not know before sending, so probing what
    the server does with such a field needs the raw route. Returns status, headers
    and the decoded JSON body (None when empty); never raises on an HTTP error status.
    """
    request = api_client.param_serialize(
        method=method,
        resource_path=path,
        query_params=sorted((query or {}).items()),
        header_params={"Content-Type": "application/json", "Accept": "application/json"},
        body=body,
        auth_settings=["BearerToken"],
    )
    response = api_client.call_api(*request)
    data = response.read()
    return int(response.status), dict(response.headers), json.loads(data) if data else None


# --------------------------------------------------------------------------- CLI


def _cmd_up(args: argparse.Namespace) -> int:
    workdir = Path(args.dir).resolve()
    if (workdir / STATE_FILE).exists():
        print(
            f"controlplane: {workdir / STATE_FILE} exists: a control plane is already recorded "
            "there; run 'down' first",
            file=sys.stderr,
        )
        return 1
    require_dev_modules()  # before a build of minutes
    bin_dir = Path(args.bin_dir) if args.bin_dir else build_binaries()
    plane = ControlPlane(workdir, bin_dir, with_scheduler=args.with_scheduler, tie_to_parent=False)
    plane.start()
    plane.detach()
    print(
        f"controlplane: up in {plane.started_seconds:.1f} s, server {plane.server}, "
        f"logs in {workdir / 'logs'}",
        file=sys.stderr,
    )
    print(plane.kubeconfig)
    return 0


def _cmd_down(args: argparse.Namespace) -> int:
    stopped = down(Path(args.dir).resolve())
    print(
        f"controlplane: stopped {', '.join(stopped) if stopped else 'nothing (already gone)'}",
        file=sys.stderr,
    )
    return 0


def _cmd_build(args: argparse.Namespace) -> int:
    print(build_binaries())
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="controlplane.py", description="Start or stop a local Kubernetes control plane."
    )
    sub = parser.add_subparsers(dest="command", required=True)
    up = sub.add_parser("up", help="start in DIR (detached) and print the admin kubeconfig path")
    up.add_argument("--dir", required=True, help="work directory (certificates, etcd data, logs)")
    up.add_argument("--bin-dir", help="use these binaries instead of running build.sh")
    up.add_argument(
        "--with-scheduler", action="store_true", help="also run the stock kube-scheduler"
    )
    up.set_defaults(func=_cmd_up)
    dn = sub.add_parser("down", help="stop the control plane recorded in DIR")
    dn.add_argument("--dir", required=True)
    dn.set_defaults(func=_cmd_down)
    build = sub.add_parser(
        "build", help="build (or find cached) binaries and print their directory"
    )
    build.set_defaults(func=_cmd_build)
    args = parser.parse_args(argv)
    try:
        return int(args.func(args))
    except ControlPlaneError as err:
        print(f"controlplane: error: {err}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main())
