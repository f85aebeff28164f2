"""The Kubeflow backend against a real Kubernetes API server (tests/kube/cluster.py).

kube-apiserver 1.20 with etcd, RBAC, the training operator v1.9.0 TFJob CRD and the Role of
docs/cloud.md, on loopback. The operator's part (pods, services, status) is played by
`tests.kube.cluster.Operator`, a stand-in; everything else is the real server's doing:
validation, authentication, authorization, watches, the pod log proxy.
"""

from __future__ import annotations

import json
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
from kubernetes import client as k8s

from components.core.launch import kubeflow, remote, tfjob_client, tfjob_submit
from components.core.launch.cloud import JobFailed
from pipelines.cli import main
from tests.kube.cluster import NAMESPACE, Operator, documented_role
from tests.test_cloud_config import make_cloud, make_run

REPO = Path(__file__).resolve().parent.parent
FAST = remote.Backoff(initial_s=0.2, multiplier=2.0, maximum_s=1.0, deadline_s=60.0)


@pytest.fixture(scope="module")
def operator(kube_cluster):
    return Operator(kube_cluster)


def cloud_for(cluster, user="submitter", **overrides):
    return make_cloud(
        target="kubeflow",
        project=None,
        region=None,
        namespace=NAMESPACE,
        kubeconfig=cluster.kubeconfig(user),
        **overrides,
    )


def train_argv(cluster, name, *flags, user="submitter", kubeconfig=None):
    return [
        "train",
        "--target",
        "kubeflow",
        "--image",
        "registry.example/strategist-trainer:1",
        "--output",
        f"gs://bucket/runs/{name}",
        "--shards-dir",
        "gs://bucket/shards/digits",
        "--namespace",
        NAMESPACE,
        "--kubeconfig",
        kubeconfig or cluster.kubeconfig(user),
        "--job-name",
        name,
        *flags,
    ]


def submit(cluster, name, lines, user="submitter", run=None, **kwargs):
    """`submit_and_wait` in this process, with the user's kube-config."""
    cloud = cloud_for(cluster, user, job_name=name)
    job = kubeflow.build_tfjob(run or make_run(), cloud)
    return tfjob_submit.submit_and_wait(
        job,
        cloud,
        client=tfjob_client.make_client(cloud),
        log=lines.append,
        backoff=FAST,
        **kwargs,
    )


def _kept(sent, stored):
    """Whether every field sent is stored unchanged (the server may add defaults)."""
    if isinstance(sent, dict):
        return isinstance(stored, dict) and all(
            key in stored and _kept(value, stored[key]) for key, value in sent.items()
        )
    if isinstance(sent, list):
        return (
            isinstance(stored, list)
            and len(sent) == len(stored)
            and all(_kept(a, b) for a, b in zip(sent, stored, strict=True))
        )
    return sent == stored


def cleanup(operator, *names):
    for name in names:
        if operator.exists(name):
            operator.custom.delete_namespaced_custom_object(
                "kubeflow.org", "v1", NAMESPACE, "tfjobs", name
            )


# --- what the server accepts ---------------------------------------------------------


@pytest.mark.parametrize("evaluator", [False, True])
@pytest.mark.parametrize(
    ("strategy", "shape"),
    [
        ("mirrored", {}),
        ("multi_worker_mirrored", {"workers": 3}),
        ("parameter_server", {"workers": 2, "ps": 2}),
    ],
)
def test_every_tfjob_and_its_replicas_are_accepted_whole(
    kube_cluster, operator, strategy, shape, evaluator
):
    """The server's CRD schema keeps every field (nothing pruned); the Pods and Services the
    operator makes from it pass core/v1 validation; every pod has CPU and memory requests."""
    name = f"accept-{strategy.replace('_', '-')[:12]}-{int(evaluator)}"
    cloud = cloud_for(kube_cluster, "admin", job_name=name, gpu="t4")
    job = kubeflow.build_tfjob(make_run(strategy, evaluator=evaluator, **shape), cloud)
    stored = operator.custom.create_namespaced_custom_object(
        "kubeflow.org", "v1", NAMESPACE, "tfjobs", job
    )
    try:
        assert _kept(job["spec"], stored["spec"]), "the server pruned a field"
        pods = operator.make_replicas(name)
        assert len(pods) == sum(spec["replicas"] for spec in job["spec"]["tfReplicaSpecs"].values())
        for pod_name in pods:
            pod = operator.core.read_namespaced_pod(pod_name, NAMESPACE)
            assert pod.status.qos_class == "Burstable", pod_name  # not BestEffort
            (container,) = pod.spec.containers
            env = {e.name: e.value for e in container.env}
            on_gpu = "nvidia.com/gpu" in (container.resources.limits or {})
            assert ("STRATEGIST_ACCELERATOR" in env) == on_gpu, pod_name
            if not on_gpu:  # a parameter server: its own CPU machine type
                assert env["STRATEGIST_MACHINE_TYPE"] == cloud.ps_machine_type
    finally:
        cleanup(operator, name)


def test_parameter_servers_ask_for_memory_by_the_models_variables(kube_cluster, operator):
    """A TFJob for ResNet-50 (23.6 M parameters) gives its parameter servers a larger memory
    request than one for the MLP (17 k), less with more servers to share it; the server's
    dry run accepts both jobs, and each PS pod as the operator makes it."""
    import dataclasses

    from kubernetes.utils import parse_quantity

    from components.core.config import ModelConfig

    core = operator.core
    requests = {}
    for model, ps in (("mlp", 1), ("resnet50", 1), ("resnet50", 2)):
        name = f"ps-memory-{model}-{ps}"
        run = dataclasses.replace(make_run("parameter_server", ps=ps), model=ModelConfig(model))
        job = kubeflow.build_tfjob(run, cloud_for(kube_cluster, "admin", job_name=name))
        stored = operator.custom.create_namespaced_custom_object(
            "kubeflow.org", "v1", NAMESPACE, "tfjobs", job, dry_run="All"
        )
        assert _kept(job["spec"], stored["spec"]), "the server pruned a field"
        template = stored["spec"]["tfReplicaSpecs"]["PS"]["template"]
        pod = core.create_namespaced_pod(
            NAMESPACE,
            {"metadata": {"name": f"{name}-ps-0"}, "spec": template["spec"]},
            dry_run="All",
        )
        assert pod.status.qos_class == "Burstable"
        requests[model, ps] = float(
            parse_quantity(pod.spec.containers[0].resources.requests["memory"])
        )
    assert requests["mlp", 1] < requests["resnet50", 2] < requests["resnet50", 1]
    # ResNet-50's 23.6 M parameters with Adam take 354 MB on one server, with headroom.
    assert requests["resnet50", 1] - requests["mlp", 1] == pytest.approx(354e6, rel=0.01)


def test_job_names_the_operator_cannot_use_are_refused_before_anything_is_sent(
    kube_cluster, operator, capsys
):
    """Defect 1. The server refuses a Service named `1run-chief-0` (DNS-1035) and one past
    63 characters; such job names exit 2 and create nothing. The longest name allowed
    gives Services the server accepts."""
    from kubernetes.client import ApiException

    for bad in ("1run-chief-0", "r" * 52 + "-evaluator-0"):
        with pytest.raises(ApiException) as refused:
            operator.core.create_namespaced_service(
                NAMESPACE,
                {
                    "metadata": {"name": bad},
                    "spec": {"clusterIP": "None", "ports": [{"port": 2222}]},
                },
            )
        assert refused.value.status == 422
    for name in ("1run", "r" * 52):
        code = main(
            train_argv(
                kube_cluster, name, "--evaluator", "--strategy", "parameter_server", "--ps", "1"
            )
        )
        assert code == 2 and "--job-name" in capsys.readouterr().err
        assert not operator.exists(name)
    longest = "r" * (63 - len("-evaluator-0"))
    cloud = cloud_for(kube_cluster, "admin", job_name=longest)
    job = kubeflow.build_tfjob(make_run("parameter_server", evaluator=True, workers=2, ps=1), cloud)
    operator.custom.create_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "tfjobs", job)
    try:
        assert f"{longest}-evaluator-0" in operator.make_replicas(longest)
    finally:
        cleanup(operator, longest)


def test_generated_names_of_one_second_differ_and_are_both_created(kube_cluster, operator):
    """Defect 8: two submissions in the same second get two names."""
    cloud = cloud_for(kube_cluster, "admin")
    jobs = [
        kubeflow.build_tfjob(make_run("multi_worker_mirrored", workers=2, evaluator=True), cloud)
        for _ in range(2)
    ]
    names = [job["metadata"]["name"] for job in jobs]
    assert names[0] != names[1]
    try:
        for job in jobs:
            operator.custom.create_namespaced_custom_object(
                "kubeflow.org", "v1", NAMESPACE, "tfjobs", job
            )
            operator.make_replicas(job["metadata"]["name"])  # its longest Service name fits
    finally:
        cleanup(operator, *names)


# --- a run from the command line -------------------------------------------------------


def test_success_prints_every_state_as_it_happens(kube_cluster, operator, capsys):
    """Defect 9 (second half): the watch prints Created, Running and Succeeded, each shown
    although the job spends well under a second in each."""
    name = "run-ok"
    thread = operator.in_background(name, "Succeeded", running_s=0.3)
    try:
        assert main(train_argv(kube_cluster, name)) == 0
        thread.join(30)
        assert not thread.errors
        out = capsys.readouterr().out
        for state in (
            "Created (TFJobCreated)",
            "Running (TFJobRunning)",
            "Succeeded (TFJobSucceeded)",
        ):
            assert f"kubeflow: {state}" in out
    finally:
        cleanup(operator, name)


def test_failure_prints_the_chiefs_log_through_the_server(kube_cluster, operator, capsys):
    """The chief's last lines come through the API server's pod log proxy; the error line
    names the job once ("Kubeflow job ...", not "TFJob job ...")."""
    name = "run-fails"
    log = "\n".join(f"step {i}" for i in range(60)) + "\nValueError: bad shard\n"
    thread = operator.in_background(name, "Failed", chief_log=log)
    try:
        assert main(train_argv(kube_cluster, name)) == 1
        thread.join(30)
        err = capsys.readouterr().err
        assert f"strategist train: error: Kubeflow job {NAMESPACE}/{name} ended Failed" in err
        assert "TFJob job" not in err
        assert "has failed because 1 Chief replica(s) failed" in err
        assert f"[{name}-chief-0] ValueError: bad shard" in err
        assert "step 10\n" not in err  # the tail only
    finally:
        cleanup(operator, name)


def test_a_name_taken_exits_2_and_attach_follows_that_job(kube_cluster, operator, capsys):
    """Defect 9: the same --job-name again exits 2 and says --attach; `--attach` follows the
    running job to its end, creating nothing."""
    name = "run-attach"
    cloud = cloud_for(kube_cluster, "admin", job_name=name)
    job = kubeflow.build_tfjob(make_run(), cloud)
    operator.custom.create_namespaced_custom_object("kubeflow.org", "v1", NAMESPACE, "tfjobs", job)
    try:
        operator.play(name, None)
        assert main(train_argv(kube_cluster, name)) == 2
        assert f"--attach {name}" in capsys.readouterr().err

        def finish():
            time.sleep(1.5)
            operator.set_pods_phase(name, "Succeeded")
            operator.condition(name, "Succeeded", Chief=(0, 1, 0))

        import threading

        threading.Thread(target=finish, daemon=True).start()
        argv = [
            "train",
            "--target",
            "kubeflow",
            "--namespace",
            NAMESPACE,
            "--kubeconfig",
            kube_cluster.kubeconfig("submitter"),
            "--attach",
            name,
        ]
        assert main(argv) == 0
        out = capsys.readouterr().out
        assert f"kubeflow: attached to TFJob {NAMESPACE}/{name}" in out
        assert (
            "kubeflow: Running (TFJobRunning)" in out
            and "kubeflow: Succeeded (TFJobSucceeded)" in out
        )
        argv[-1] = "no-such-job"
        assert main(argv) == 2
        assert "no TFJob strategist/no-such-job to attach to" in capsys.readouterr().err
    finally:
        cleanup(operator, name)


# --- errors: the server's own words, and what is not retried ---------------------------


@pytest.mark.parametrize(
    ("user", "expected"),
    [
        (
            "nobody",
            'HTTP 403 Forbidden: tfjobs.kubeflow.org is forbidden: User "nobody" '
            'cannot create resource "tfjobs"',
        ),
        ("wrong-token", "HTTP 401 Unauthorized: Unauthorized"),
    ],
)
def test_401_and_403_print_the_servers_message_and_are_not_retried(
    kube_cluster, operator, capsys, user, expected
):
    """Defect 2: the line has the status, reason and the server's `message`, not headers."""
    if user == "wrong-token":
        kubeconfig = kube_cluster.kubeconfig("admin", token="not-a-known-token")
    else:
        kubeconfig = kube_cluster.kubeconfig(user)
    assert main(train_argv(kube_cluster, f"run-{user}", kubeconfig=kubeconfig)) == 1
    captured = capsys.readouterr()
    assert expected in captured.err
    assert "retrying" not in captured.out + captured.err
    assert "HTTPHeaderDict" not in captured.err


def test_a_server_certificate_that_does_not_verify_is_not_retried(kube_cluster, capsys):
    """Defect 3: a wrong CA is permanent: one line, exit 1, within seconds."""
    kubeconfig = kube_cluster.kubeconfig("submitter", ca=kube_cluster.certs.other_ca)
    started = time.monotonic()
    assert main(train_argv(kube_cluster, "run-wrong-ca", kubeconfig=kubeconfig)) == 1
    captured = capsys.readouterr()
    assert time.monotonic() - started < 15
    assert "CERTIFICATE_VERIFY_FAILED" in captured.err
    assert "retrying" not in captured.out + captured.err


# --- a job given up on, a failed one replaced, re-attaching ------------------------------


def _revoke(operator, verbs):
    """Replaces the documented Role's TFJob verbs with `verbs`; returns a restore()."""
    rbac = k8s.RbacAuthorizationV1Api(operator.custom.api_client)
    (role,) = [d for d in documented_role("submitter") if d["kind"] == "Role"]
    changed = json.loads(json.dumps(role))
    changed["rules"][0]["verbs"] = verbs
    rbac.replace_namespaced_role(role["metadata"]["name"], NAMESPACE, changed)
    return lambda: rbac.replace_namespaced_role(role["metadata"]["name"], NAMESPACE, role)


@pytest.mark.parametrize(
    ("name", "kept"), [("run-revoked", ["create", "delete"]), ("run-revoked-all", ["create"])]
)
def test_a_job_given_up_on_is_deleted_or_the_last_line_says_how(kube_cluster, operator, name, kept):
    """Defect 4: `get` revoked mid-run: the job is deleted; with `delete` revoked too, the
    error says the job may still run and gives the delete command."""
    lines, restore = [], []
    thread = operator.in_background(name, None)

    def revoke_when_running(line):
        lines.append(line)
        if "Running" in line and not restore:
            restore.append(_revoke(operator, kept))

    cloud = cloud_for(kube_cluster, job_name=name)
    try:
        with pytest.raises(remote.RemoteCallFailed) as failed:
            tfjob_submit.submit_and_wait(
                kubeflow.build_tfjob(make_run(), cloud),
                cloud,
                client=tfjob_client.make_client(cloud),
                log=revoke_when_running,
                backoff=FAST,
                poll_seconds=1,
            )
        thread.join(30)
        message = str(failed.value)
        assert "HTTP 403 Forbidden" in message
        if "delete" in kept:
            assert not operator.exists(name)
            assert f"TFJob {NAMESPACE}/{name} deleted" in message
        else:
            assert operator.exists(name)
            command = f"`kubectl -n {NAMESPACE} delete tfjob {name}`"
            assert message.endswith(f"may still be running: delete it with {command}")
    finally:
        for undo in restore:
            undo()
        cleanup(operator, name)


def test_reattach_follows_a_running_or_succeeded_job_and_replaces_a_failed_or_gone_one(
    kube_cluster, operator, tmp_path
):
    """Defect 5 and the step's re-attach: the recorded job running is followed; succeeded,
    only read; failed under the same name, deleted then replaced; gone, replaced."""
    name = "run-step"
    record = tmp_path / "gcp_resources"
    try:
        # First attempt: the job fails.
        thread = operator.in_background(name, "Failed", chief_log="boom\n")
        with pytest.raises(JobFailed):
            submit(kube_cluster, name, [], gcp_resources=str(record))
        thread.join(30)
        first_uid = operator.job(name)["metadata"]["uid"]
        # The retried step: the failed job of the same name is deleted, a new one made.
        lines = []
        thread = operator.in_background(name, "Succeeded", replacing=first_uid)
        assert submit(kube_cluster, name, lines, gcp_resources=str(record)) == "Succeeded"
        thread.join(30)
        assert (
            f"kubeflow: the recorded TFJob {NAMESPACE}/{name} failed; deleting it to replace it"
            in lines
        )
        assert operator.job(name)["metadata"]["uid"] != first_uid
        # Again: the recorded job succeeded, so it is only read.
        lines = []
        assert submit(kube_cluster, name, lines, gcp_resources=str(record)) == "Succeeded"
        assert not any("created TFJob" in line for line in lines)
        # Gone: a new one is created.
        cleanup(operator, name)
        while operator.exists(name):
            time.sleep(0.2)
        lines = []
        thread = operator.in_background(name, "Succeeded", replacing=first_uid)
        assert submit(kube_cluster, name, lines, gcp_resources=str(record)) == "Succeeded"
        thread.join(30)
        assert (
            f"kubeflow: the recorded TFJob {NAMESPACE}/{name} no longer exists; creating a new one"
            in lines
        )
    finally:
        cleanup(operator, name)


# --- a frozen or stopped API server -----------------------------------------------------


def test_a_frozen_server_times_calls_out_with_a_line_while_waiting(
    kube_cluster, operator, monkeypatch
):
    """Defect 7: with the server frozen, create says it is waiting, times out and retries;
    the server back, the job is created (or found created by the first attempt)."""
    import threading

    name = "run-frozen"
    monkeypatch.setattr(tfjob_submit, "SLOW_CALL_NOTICE_S", 1.0)
    cloud = cloud_for(kube_cluster, job_name=name)
    client = tfjob_client.make_client(cloud)
    client.call_timeout_s = 2.0
    lines = []
    thread = operator.in_background(name, "Succeeded")
    try:
        with kube_cluster.frozen():
            waiter = threading.Thread(
                target=lambda: lines.append(
                    tfjob_submit.submit_and_wait(
                        kubeflow.build_tfjob(make_run(), cloud),
                        cloud,
                        client=client,
                        log=lines.append,
                        backoff=FAST,
                    )
                ),
                daemon=True,
            )
            waiter.start()
            time.sleep(4)
        waiter.join(60)
        thread.join(30)
        assert lines[-1] == "Succeeded"
        assert "kubeflow: create TFJob: no reply after 1s; still waiting" in lines
        retries = [line for line in lines if "create TFJob: transient error" in line]
        assert retries and all("timed out" in line for line in retries), lines
    finally:
        cleanup(operator, name)


def _cli(kube_cluster, name, *flags):
    return subprocess.Popen(
        [
            sys.executable,
            "-c",
            "import sys; from pipelines.cli import main; sys.exit(main())",
            *train_argv(kube_cluster, name, *flags),
        ],
        cwd=REPO,
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        text=True,
    )


def _wait_for_line(process, text, timeout_s=60):
    lines = []
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        line = process.stdout.readline()
        if not line:
            break
        lines.append(line)
        if text in line:
            return lines
    raise AssertionError(f"no {text!r} in {''.join(lines)}")


@pytest.mark.parametrize(("signum", "code"), [(signal.SIGTERM, 143), (signal.SIGINT, 130)])
def test_a_signal_deletes_the_job(kube_cluster, operator, signum, code):
    name = f"run-signal-{code}"
    operator.in_background(name, None)
    process = _cli(kube_cluster, name)
    try:
        _wait_for_line(process, "Running (TFJobRunning)")
        process.send_signal(signum)
        out = process.communicate(timeout=60)[0]
        assert process.returncode == code, out
        assert f"kubeflow: interrupted, deleting TFJob {NAMESPACE}/{name}" in out
        assert not operator.exists(name)
    finally:
        if process.poll() is None:
            process.kill()
        cleanup(operator, name)


def test_a_cancel_during_a_frozen_server_fits_the_grace_period_and_says_why(kube_cluster, operator):
    """Defect 6: SIGTERM with the server frozen: the deletion's retries end within
    Kubernetes' default 30 s grace, blame the timeout (not the signal), and the last
    line says the job may still run."""
    name = "run-cancel-frozen"
    operator.in_background(name, None)
    process = _cli(kube_cluster, name)
    try:
        _wait_for_line(process, "Running (TFJobRunning)")
        with kube_cluster.frozen():
            started = time.monotonic()
            process.send_signal(signal.SIGTERM)
            out = process.communicate(timeout=60)[0]
            took = time.monotonic() - started
        assert process.returncode == 143, out
        assert took < 30, out
        retries = [
            line for line in out.splitlines() if "kubeflow: delete TFJob: transient error" in line
        ]
        assert retries and all("timed out" in line for line in retries), out
        assert "received signal" not in "\n".join(retries)
        assert "the job may still run" in out
    finally:
        if process.poll() is None:
            process.kill()
        cleanup(operator, name)


def test_a_server_outage_while_following_is_survived(kube_cluster, operator):
    """The API server unreachable while the job runs (connections cut and refused, as
    when it stops): reads are retried with a line each, and the job is followed to its
    end once the server is back."""
    import threading

    name = "run-outage"
    operator.in_background(name, None)
    relay = kube_cluster.relay()
    cloud = make_cloud(
        target="kubeflow",
        project=None,
        region=None,
        namespace=NAMESPACE,
        job_name=name,
        kubeconfig=kube_cluster.kubeconfig("submitter", relay=relay),
    )
    lines, result = [], []
    waiter = threading.Thread(
        target=lambda: result.append(
            tfjob_submit.submit_and_wait(
                kubeflow.build_tfjob(make_run(), cloud),
                cloud,
                client=tfjob_client.make_client(cloud),
                log=lines.append,
                backoff=remote.Backoff(initial_s=1, multiplier=2, maximum_s=2, deadline_s=120),
                poll_seconds=1,
            )
        ),
        daemon=True,
    )
    try:
        waiter.start()
        deadline = time.monotonic() + 60
        while not any("Running" in line for line in lines) and time.monotonic() < deadline:
            time.sleep(0.1)
        relay.cut()
        time.sleep(5)
        relay.restore()
        operator.set_pods_phase(name, "Succeeded")
        operator.condition(name, "Succeeded", Chief=(0, 1, 0))
        waiter.join(60)
        assert result == ["Succeeded"], lines
        assert any("get TFJob: transient error" in line and "retrying" in line for line in lines)
    finally:
        relay.cut()
        cleanup(operator, name)
