"""The rig's routing follows the variant table and pools.bzl (pools.py, buildgrid_config.py)."""

import pathlib
import re
import tempfile
import unittest

from tools.hardware import table
from tools.remote import buildgrid_config, check_remote, pools, rig_settings


def _render(**overrides):
    args = dict(
        port=8980,
        redis_port=9080,
        instance="main",
        cas_dir=pathlib.Path("/rig/cas"),
        pg_socket_dir=pathlib.Path("/rig/pg"),
        threads=200,
    )
    return buildgrid_config.render(**{**args, **overrides})


class PoolsTest(unittest.TestCase):
    def test_reads_key_and_a_pool_per_variant(self):
        key, by_variant = pools.read_pools()
        self.assertTrue(key)
        self.assertEqual(list(by_variant), list(table.table()["VARIANTS"]))
        self.assertEqual(by_variant["multi_gpu"], "gpu-h200-x2")

    def test_missing_assignment_is_an_error(self):
        with self.assertRaises(SystemExit):
            pools.read_pools(pathlib.Path(__file__))


class ConfigTest(unittest.TestCase):
    def test_one_label_per_pool_cpu_first_key_exclusive(self):
        key, by_variant = pools.read_pools()
        config = _render()
        labels = re.findall(r'- \{label: "([^"]+)", properties: \[\["([^"]+)"', config)
        self.assertEqual(labels[0], (by_variant["cpu"], key))  # actions without a pool go here
        self.assertEqual(sorted(p for p, _ in labels), sorted(set(by_variant.values())))
        self.assertIn(f'exclusive-property-keys: ["{key}"]', config)

    def test_a_gpu_hosts_own_pools_are_labels_too(self):
        config = _render(extra_pools=("gpu-h100-x1",))
        self.assertIn('{label: "gpu-h100-x1", properties: [["Pool", "gpu-h100-x1"]]}', config)

    def test_listens_on_loopback_only(self):
        self.assertIn('address: "127.0.0.1:8980"', _render())

    def test_queue_holds_a_cold_upload_unless_defaults_are_asked_for(self):
        self.assertIn("grpc.server.max_pending_requests: 20000", _render())
        self.assertNotIn("max_pending_requests", _render(queue_options=False))

    def test_busy_bots_are_answered_at_once(self):
        # else a finished action waits for the bot's long poll to end (README, "Restarts")
        config = _render()
        self.assertRegex(
            config, r"- !bots\n +scheduler: \*scheduler\n +long-poll-during-execution: false"
        )
        self.assertIn("endpoints: [execution, operations]", config)  # one Bots service

    def test_concurrent_rpcs_never_exceed_threads(self):
        config = _render(threads=123)
        self.assertIn("thread-pool-size: 123", config)
        self.assertIn("maximum-concurrent-rpcs: 123", config)


class SettingsTest(unittest.TestCase):
    def test_bazelrc_names_the_rigs_port_and_instance(self):
        bazelrc = (table.ROOT / ".bazelrc").read_text()
        endpoints = re.findall(r"^build:\w+ --remote_(?:executor|cache)=(\S+)$", bazelrc, re.M)
        instances = re.findall(r"^build:\w+ --remote_instance_name=(\S+)$", bazelrc, re.M)
        self.assertEqual(len(endpoints), 2)  # --config=remote and --config=remote_cache
        self.assertEqual(set(endpoints), {f"grpc://127.0.0.1:{rig_settings.PORT}"})
        self.assertEqual(set(instances), {rig_settings.INSTANCE})
        self.assertEqual(len(instances), 2)
        rig_dir = rig_settings.SETTINGS["RIG_DIR"]
        self.assertRegex(bazelrc, rf"(?m)^try-import {re.escape(rig_dir)}/auth\.bazelrc$")


class CheckRemoteTest(unittest.TestCase):
    """check_remote.py: what check_remote.sh routes by and reads from the workers' logs."""

    def test_pools_and_variants_follow_the_table(self):
        key, by_variant = pools.read_pools()
        self.assertEqual(check_remote.cpu_pool(), [f"{key} {by_variant['cpu']}"])
        variants = table.table()["VARIANTS"].values()
        gpu = [v for v in variants if v["gpus"]]
        self.assertEqual(check_remote.gpu_variants(), [f"{v['suffix']} {v['pool']}" for v in gpu])
        self.assertNotIn(
            by_variant["cpu"], [line.split()[1] for line in check_remote.gpu_variants()]
        )
        self.assertEqual(check_remote.most_gpus(), [str(max(v["gpus"] for v in gpu))])

    def test_executions_from_a_worker_log(self):
        with tempfile.TemporaryDirectory() as tmp:
            log = pathlib.Path(tmp, "worker-gpu.log")
            log.write_text(
                "2026-01-01 INFO bots: leased x\n"
                '2026-01-01 INFO bots: executed {"pool": {"Pool": "gpu-h100-x1"}, '
                '"program": "test-setup.sh", "target": "//tools/remote:probe_gpu"}\n'
                '2026-01-01 INFO bots: executed {"pool": {}, "target": "//a:b"}\n'
            )
            self.assertEqual(
                check_remote.executions(str(log)),
                ["//tools/remote:probe_gpu Pool=gpu-h100-x1 test-setup.sh", "//a:b (no pool) ?"],
            )
            self.assertEqual(check_remote.executions(str(log.with_name("none.log"))), [])


if __name__ == "__main__":
    unittest.main()
