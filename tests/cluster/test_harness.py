"""The control-plane harness's own logic, without Go or a running cluster (default suite)."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml
from controlplane import (
    BUILD_SCRIPT,
    CLIENTS,
    DEFAULT_FEATURE_GATES,
    STATE_FILE,
    ControlPlane,
    ControlPlaneError,
    GoNotFoundError,
    build_binaries,
    check_bin_dir,
    down,
    generate_pki,
    group_members,
    main,
    write_kubeconfig,
)
from cryptography import x509
from cryptography.hazmat.primitives.asymmetric import ec
from cryptography.x509.oid import ExtendedKeyUsageOID, NameOID

CONTROLPLANE_PY = Path(__file__).parent / "controlplane.py"


def _load(path: Path) -> x509.Certificate:
    return x509.load_pem_x509_certificate(path.read_bytes())


def _verify_signed_by(cert: x509.Certificate, ca: x509.Certificate) -> None:
    cert.verify_directly_issued_by(ca)


def test_pki_serving_cert_names_loopback_and_service_names(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path / "pki")
    ca = _load(pki.ca_cert)
    serving = _load(pki.serving_cert)
    _verify_signed_by(serving, ca)
    assert ca.extensions.get_extension_for_class(x509.BasicConstraints).value.ca is True
    sans = serving.extensions.get_extension_for_class(x509.SubjectAlternativeName).value
    assert "kubernetes.default.svc" in sans.get_values_for_type(x509.DNSName)
    assert "localhost" in sans.get_values_for_type(x509.DNSName)
    ips = {str(ip) for ip in sans.get_values_for_type(x509.IPAddress)}
    assert ips == {"127.0.0.1", "10.0.0.1"}
    usage = serving.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
    assert list(usage) == [ExtendedKeyUsageOID.SERVER_AUTH]


def test_pki_client_certs_carry_user_and_group(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    ca = _load(pki.ca_cert)
    for stem, (user, group) in CLIENTS.items():
        cert = _load(pki.client_cert(stem))
        _verify_signed_by(cert, ca)
        assert cert.subject.get_attributes_for_oid(NameOID.COMMON_NAME)[0].value == user
        assert cert.subject.get_attributes_for_oid(NameOID.ORGANIZATION_NAME)[0].value == group
        usage = cert.extensions.get_extension_for_class(x509.ExtendedKeyUsage).value
        assert list(usage) == [ExtendedKeyUsageOID.CLIENT_AUTH]
        assert oct(pki.client_key(stem).stat().st_mode & 0o777) == "0o600"


def test_pki_service_account_pair_matches(tmp_path: Path) -> None:
    from cryptography.hazmat.primitives import serialization

    pki = generate_pki(tmp_path)
    private = serialization.load_pem_private_key(pki.sa_key.read_bytes(), password=None)
    public = serialization.load_pem_public_key(pki.sa_pub.read_bytes())
    assert isinstance(private, ec.EllipticCurvePrivateKey)
    assert private.public_key().public_numbers() == public.public_numbers()  # type: ignore[union-attr]


def test_kubeconfig_points_at_server_and_user_files(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path / "pki")
    path = write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:6443", pki, "admin")
    config = yaml.safe_load(path.read_text())
    assert config["current-context"] == "dra-affinity"
    assert config["clusters"][0]["cluster"] == {
        "server": "https://127.0.0.1:6443",
        "certificate-authority": str(pki.ca_cert),
    }
    assert config["users"][0]["user"]["client-certificate"] == str(pki.client_cert("admin"))
    # Same input, same bytes.
    first = path.read_bytes()
    write_kubeconfig(path, "https://127.0.0.1:6443", pki, "admin")
    assert path.read_bytes() == first


def test_kubeconfig_rejects_unknown_user(tmp_path: Path) -> None:
    pki = generate_pki(tmp_path)
    with pytest.raises(ControlPlaneError, match="unknown user 'nobody'"):
        write_kubeconfig(tmp_path / "kc", "https://127.0.0.1:1", pki, "nobody")


def test_feature_gates_rendered_sorted() -> None:
    plane = ControlPlane(Path("/nonexistent"), Path("/nonexistent"))
    gates = plane._gates()
    assert gates == ",".join(f"{k}=true" for k in sorted(DEFAULT_FEATURE_GATES))
    plane = ControlPlane(Path("/x"), Path("/y"), feature_gates={"B": False, "A": True})
    assert plane._gates() == "A=true,B=false"


def test_check_bin_dir_names_missing_binaries(tmp_path: Path) -> None:
    (tmp_path / "etcd").write_text("#!/bin/sh\n")
    (tmp_path / "etcd").chmod(0o755)
    (tmp_path / "kube-apiserver").write_text("not executable")
    with pytest.raises(ControlPlaneError) as err:
        check_bin_dir(tmp_path)
    assert "kube-apiserver, kube-controller-manager, kube-scheduler" in str(err.value)
    assert "etcd" not in str(err.value).split("missing")[1]


def test_start_with_missing_binaries_fails_before_starting_anything(tmp_path: Path) -> None:
    plane = ControlPlane(tmp_path / "work", tmp_path / "bin")
    with pytest.raises(ControlPlaneError, match="missing executable"):
        plane.start()
    assert plane.components == []
    assert not (tmp_path / "work").exists()


def test_start_rejects_extra_args_for_unknown_component(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
        (bin_dir / name).chmod(0o755)
    plane = ControlPlane(tmp_path / "work", bin_dir, extra_args={"kubelet": ["--v=4"]})
    with pytest.raises(ControlPlaneError, match="unknown component"):
        plane.start()


def test_component_exiting_at_start_is_reported_with_its_log(tmp_path: Path) -> None:
    """A binary that dies during start-up names itself and shows its output; nothing survives."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        (bin_dir / name).write_text(
            f"#!/bin/sh\necho '{name}: flag provided but not defined' >&2\nexit 3\n"
        )
        (bin_dir / name).chmod(0o755)
    plane = ControlPlane(tmp_path / "work", bin_dir)
    with pytest.raises(ControlPlaneError) as err:
        plane.start()
    assert "etcd exited with code 3" in str(err.value)
    assert "etcd: flag provided but not defined" in str(err.value)
    assert plane.components == []
    assert not (tmp_path / "work" / STATE_FILE).exists()


def test_component_never_ready_times_out_and_is_killed(tmp_path: Path) -> None:
    """A binary that runs but never answers its health check is stopped after the timeout."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pid_file = tmp_path / "pid"
    for name in ("etcd", "kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        # Ignores SIGTERM, so stopping it needs the SIGKILL escalation.
        (bin_dir / name).write_text(
            f"#!/bin/sh\necho $$ > {pid_file}\ntrap '' TERM\nwhile :; do sleep 0.05; done\n"
        )
        (bin_dir / name).chmod(0o755)
    plane = ControlPlane(tmp_path / "work", bin_dir, start_timeout=1.0, stop_grace=0.5)
    with pytest.raises(ControlPlaneError, match="etcd not ready after 1 s"):
        plane.start()
    pid = int(pid_file.read_text())
    assert not _running(pid)
    assert group_members(pid) == []  # its `sleep` children went with the group


def test_build_without_go_is_a_clear_error(tmp_path: Path) -> None:
    env = {"PATH": str(tmp_path), "HOME": str(tmp_path)}
    with pytest.raises(GoNotFoundError, match="'go' is not on PATH"):
        build_binaries(env=env)


def test_build_script_without_go_exits_2_with_message(tmp_path: Path) -> None:
    bash = "/bin/bash" if Path("/bin/bash").exists() else "/usr/bin/bash"
    # PATH holds the coreutils build.sh needs before it looks for go, but no go.
    tools = tmp_path / "tools"
    tools.mkdir()
    for tool in ("dirname", "awk"):
        for prefix in ("/usr/bin", "/bin"):
            if Path(prefix, tool).exists():
                (tools / tool).symlink_to(Path(prefix, tool))
                break
    proc = subprocess.run(
        [bash, str(BUILD_SCRIPT)],
        env={"PATH": str(tools), "HOME": str(tmp_path)},
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 2
    assert "'go' is not on PATH" in proc.stderr
    assert proc.stdout == ""


def test_down_without_state_is_a_clear_error(tmp_path: Path) -> None:
    with pytest.raises(ControlPlaneError, match=r"state\.json: no control plane recorded here"):
        down(tmp_path)
    assert main(["down", "--dir", str(tmp_path)]) == 1


def test_down_with_corrupt_state_is_a_clear_error(tmp_path: Path) -> None:
    (tmp_path / STATE_FILE).write_text('{"components": [{"name": "etcd"}]}')
    with pytest.raises(ControlPlaneError, match=r"unreadable state \('pid'\)"):
        down(tmp_path)
    (tmp_path / STATE_FILE).write_text("not json")
    with pytest.raises(ControlPlaneError, match="unreadable state"):
        down(tmp_path)


def test_down_stops_recorded_group_and_skips_reused_pids(tmp_path: Path) -> None:
    sleeper = subprocess.Popen(["sleep", "60"], start_new_session=True)
    bystander = subprocess.Popen(["sleep", "60"], start_new_session=True)
    try:
        state = {
            "components": [
                {
                    "name": "etcd",
                    "pid": sleeper.pid,
                    "exe": os.readlink(f"/proc/{sleeper.pid}/exe"),
                },
                # Recorded under another binary: a reused pid, must be left alone.
                {
                    "name": "kube-apiserver",
                    "pid": bystander.pid,
                    "exe": "/nonexistent/kube-apiserver",
                },
            ]
        }
        (tmp_path / STATE_FILE).write_text(json.dumps(state))
        assert down(tmp_path, grace=2.0) == ["etcd"]
        assert sleeper.wait(timeout=5) == -signal.SIGTERM
        assert bystander.poll() is None
        assert not (tmp_path / STATE_FILE).exists()
    finally:
        for proc in (sleeper, bystander):
            proc.kill()
            proc.wait()


def test_cli_up_refuses_a_directory_already_in_use(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / STATE_FILE).write_text("{}")
    assert main(["up", "--dir", str(tmp_path), "--bin-dir", str(tmp_path)]) == 1
    assert "already recorded" in capsys.readouterr().err


def test_cli_reports_errors_without_traceback(tmp_path: Path) -> None:
    proc = subprocess.run(
        [
            sys.executable,
            str(CONTROLPLANE_PY),
            "up",
            "--dir",
            str(tmp_path / "w"),
            "--bin-dir",
            str(tmp_path),
        ],
        capture_output=True,
        text=True,
        check=False,
    )
    assert proc.returncode == 1
    assert proc.stderr.startswith("controlplane: error: ")
    assert "missing executable(s) etcd" in proc.stderr
    assert "Traceback" not in proc.stderr


def test_cli_up_without_the_dev_extras_names_the_package(tmp_path: Path) -> None:
    """Run as if ``cryptography`` were not installed: one line, before any build."""
    script = (
        "import runpy, sys; sys.modules['cryptography'] = None;"  # import fails
        "sys.argv = sys.argv[1:]; runpy.run_path(sys.argv[0], run_name='__main__')"
    )
    proc = subprocess.run(
        [sys.executable, "-c", script, str(CONTROLPLANE_PY), "up", "--dir", str(tmp_path / "w")],
        capture_output=True,
        text=True,
        check=False,
        env={**os.environ, "PATH": ""},  # a build would fail on the missing go instead
    )
    assert proc.returncode == 1
    assert proc.stderr.splitlines() == [
        "controlplane: error: the Python package 'cryptography' is missing (the control "
        "plane's certificates); it is a dev extra of this project: pip install -e '.[dev]'"
    ]
    assert not (tmp_path / "w").exists()


def test_parent_death_takes_components_along(tmp_path: Path) -> None:
    """A plane started from Python dies with it even when exit hooks never run (SIGKILL)."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    pid_file = tmp_path / "pid"
    for name in ("kube-apiserver", "kube-controller-manager", "kube-scheduler"):
        (bin_dir / name).write_text("#!/bin/sh\nexit 1\n")
    (bin_dir / "etcd").write_text(f"#!/bin/sh\necho $$ > {pid_file}\nexec sleep 60\n")
    for exe in bin_dir.iterdir():
        exe.chmod(0o755)
    script = (
        "import sys; sys.path.insert(0, sys.argv[1]);"
        "from pathlib import Path; from controlplane import ControlPlane;"
        "p = ControlPlane(Path(sys.argv[2]), Path(sys.argv[3]), start_timeout=60);"
        "p.start()"
    )
    parent = subprocess.Popen(
        [
            sys.executable,
            "-c",
            script,
            str(CONTROLPLANE_PY.parent),
            str(tmp_path / "w"),
            str(bin_dir),
        ]
    )
    deadline = time.monotonic() + 30
    while not (pid_file.exists() and pid_file.read_text().strip()):
        assert time.monotonic() < deadline, "fake etcd never started"
        time.sleep(0.05)
    child = int(pid_file.read_text())
    parent.kill()
    parent.wait()
    deadline = time.monotonic() + 10
    while _running(child):
        assert time.monotonic() < deadline, f"component {child} outlived its killed parent"
        time.sleep(0.05)


def _running(pid: int) -> bool:
    """True while pid exists and is not a zombie waiting to be reaped."""
    try:
        stat = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return False
    return stat.rsplit(") ", 1)[1][0] != "Z"
