"""The Python module: same keys as the scenario file in, same structure as the CLI's
--json out, errors as exceptions with diagnostics. Run by ctest (python_unittest)
with PYTHONPATH at the build tree's package, or against an installed copy."""

import json
import os
import subprocess
import unittest

import trainplan

# Llama-2-13B: 13,015,864,320 parameters (design reference; Touvron et al. 2023).
LLAMA2_13B = 13_015_864_320


class FitTest(unittest.TestCase):
    def test_qlora_13b_fits_a_24gb_card(self):
        # QLoRA (Dettmers et al. 2023): 33B fits one 24 GB card, so 13B does.
        r = trainplan.fit(model="llama-2-13b", gpu="rtx-4090", method="qlora")
        self.assertIs(r["memory"]["fits"], True)
        self.assertEqual(r["model"]["params"], LLAMA2_13B)
        self.assertLess(r["memory"]["total_bytes"], r["memory"]["capacity_bytes"])

    def test_full_fine_tune_does_not_fit_and_is_an_answer(self):
        r = trainplan.fit(model="llama-2-13b", gpu="rtx-4090")
        self.assertIs(r["memory"]["fits"], False)
        # bf16 weights: 2 bytes per parameter.
        self.assertEqual(r["memory"]["weights_bytes"], 2 * LLAMA2_13B)

    def test_dict_laid_out_like_the_scenario_file_equals_keywords(self):
        # Two independent paths: the scenario-file reader vs the flags.
        as_file = trainplan.fit({
            "model": {"preset": "llama-2-7b"},
            "hardware": {"gpu": "a100-sxm-80gb", "gpus": 8},
            "training": {"method": "full", "zero": 3, "seq_len": 4096, "micro_batch": 2, "recompute": "full"},
        })
        as_kwargs = trainplan.fit(model="llama-2-7b", gpu="a100-sxm-80gb", gpus=8, method="full", zero=3,
                                  seq_len=4096, micro_batch=2, recompute="full")
        self.assertEqual(as_file["memory"], as_kwargs["memory"])
        self.assertEqual(as_file["training"]["zero"], 3)
        # A flat dict is the same as keywords.
        self.assertEqual(trainplan.fit({"model": "llama-2-7b", "gpu": "rtx-4090"})["memory"],
                         trainplan.fit(model="llama-2-7b", gpu="rtx-4090")["memory"])

    def test_same_structure_as_the_cli_json(self):
        exe = os.environ.get("TRAINPLAN_CLI")
        if not exe:
            self.skipTest("TRAINPLAN_CLI not set")
        args = ["llama-2-7b", "--gpu", "a100-sxm-80gb", "--gpus", "8", "--zero", "2"]
        for command in ("fit", "simulate"):
            cli = subprocess.run([exe, command, *args, "--json"], capture_output=True, text=True)
            self.assertIn(cli.returncode, (0, 1), cli.stderr)
            py = getattr(trainplan, command)(model="llama-2-7b", gpu="a100-sxm-80gb", gpus=8, zero=2)
            self.assertEqual(py, json.loads(cli.stdout))


class ErrorTest(unittest.TestCase):
    def test_unknown_gpu_raises_with_suggestions(self):
        with self.assertRaises(trainplan.TrainplanError) as cm:
            trainplan.fit(model="llama-2-13b", gpu="a100")
        e = cm.exception
        self.assertEqual(e.exit_code, 2)
        self.assertEqual(e.diagnostics, ['unknown GPU preset "a100"; did you mean "a100-sxm-40gb", "a100-sxm-80gb", '
                                         '"a100-pcie-40gb"? (run \'trainplan gpus\' for the list)'])

    def test_unknown_key_names_the_flag(self):
        with self.assertRaises(trainplan.TrainplanError) as cm:
            trainplan.fit(model="llama-2-13b", gpu="rtx-4090", methd="qlora")
        self.assertIn('unknown flag "--methd"', str(cm.exception))
        self.assertIn('"--method"', str(cm.exception))

    def test_bad_value_in_a_scenario_dict(self):
        with self.assertRaises(trainplan.TrainplanError) as cm:
            trainplan.fit({"model": {"preset": "llama-2-7b"}, "hardware": {"gpu": "rtx-4090"},
                           "training": {"recompute": "sometimes"}})
        self.assertIn('recompute = "sometimes" is not one of: none, selective, full', str(cm.exception))


class OtherCommandsTest(unittest.TestCase):
    def test_simulate_plan_size(self):
        s = trainplan.simulate(model="llama-2-7b", gpu="a100-sxm-80gb", gpus=8)
        self.assertGreater(s["throughput"]["tokens_per_s"], 0)
        p = trainplan.plan(model="llama-2-7b", gpu="a100-sxm-80gb", gpus=8, top=3, threads=1)
        self.assertEqual(len(p["layouts"]), 3)
        for layout in p["layouts"]:
            self.assertEqual(layout["hardware"]["gpus"], 8)
            self.assertIs(layout["memory"]["fits"], True)
        # A list becomes a repeated flag: each GPU's rent reaches its own cost
        # (rent = rate x GPU-hours).
        z = trainplan.size(model="llama-2-7b", tokens=1e9, deadline_days=30, candidates=["rtx-4090", "a100-sxm-80gb"],
                           rent=["rtx-4090=0.5", "a100-sxm-80gb=1.5"], max_gpus=16, threads=1)
        rates = {c["gpu"]: c["rent_cost_usd"] / c["gpu_hours"] for c in z["candidates"]}
        self.assertAlmostEqual(rates["rtx-4090"], 0.5)
        self.assertAlmostEqual(rates["a100-sxm-80gb"], 1.5)

    def test_version(self):
        self.assertRegex(trainplan.__version__, r"^\d+\.\d+\.\d+$")


if __name__ == "__main__":
    unittest.main()
