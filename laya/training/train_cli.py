"""`laya train`: JSONL dataset -> frozen feature store -> zero-layer head ->
temperature on dev_cal -> certified threshold on dev_conf -> artifact-v1 export.

Pins one torch thread (before any torch work) so that a store built by one run is
reusable by the next: the thread count is part of the store's numeric profile.
"""

from __future__ import annotations

import sys
from pathlib import Path

import click

from laya.errors import LayaError


def _progress(label: str, total: int):
    return click.progressbar(length=total, label=label, file=sys.stderr, show_pos=True)


@click.command("train")
@click.option("--base", "base_dir", required=True, type=click.Path(file_okay=False, exists=True),
              help="artifact directory whose verified encoder the head is trained on (and exported with)")
@click.option("--data", "data_path", required=True, type=click.Path(dir_okay=False, exists=True),
              help="JSONL dataset: id, split (train|dev_cal|dev_conf), task, question, options, label|target")
@click.option("--out", "out_dir", required=True, type=click.Path(file_okay=False),
              help="new artifact directory to write")
@click.option("--store", "store_path", type=click.Path(dir_okay=False),
              help="feature store file: reused if it exists (and matches), written otherwise "
                   "[default: OUT.features.safetensors]")
@click.option("--kind", type=click.Choice(["float32", "int8"]), default="float32", show_default=True,
              help="head weights to export: float32, or int8 quantized from the float32 readout")
@click.option("--warm-start", "warm_start_dir", type=click.Path(file_okay=False, exists=True),
              help="continue training this (zero-layer) head artifact on the same base")
@click.option("--seed", default=0, show_default=True, type=int,
              help="seed of a new head's initial weights and of the mini-batch order")
@click.option("--epochs", default=100, show_default=True, type=click.IntRange(min=1),
              help="passes over the train split")
@click.option("--learning-rate", default=0.1, show_default=True, type=click.FloatRange(min=0, min_open=True),
              help="Adam's learning rate")
@click.option("--target-risk", default=0.1, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="largest acceptable error rate among acted-on requests")
@click.option("--delta", default=0.05, show_default=True, type=click.FloatRange(0, 1, min_open=True, max_open=True),
              help="the certificate holds with confidence 1 - delta")
@click.option("--sequence-budget", type=click.IntRange(min=4), help="head sequence budget [default: the base's maximum]")
def train(base_dir, data_path, out_dir, store_path, kind, warm_start_dir, seed, epochs, learning_rate, target_risk,
          delta, sequence_budget) -> None:
    """Train, calibrate, certify and export one head; print a summary."""
    import torch

    torch.set_num_threads(1)
    from laya.training.dataset import read_dataset
    from laya.training.pipeline import train_artifact
    from laya.training.head_training import TrainConfig

    try:
        config = TrainConfig(seed=seed, epochs=epochs, learning_rate=learning_rate)
    except ValueError as exc:  # an infinite rate: the option's range has no upper end to refuse it
        raise click.BadParameter(str(exc), param_hint="'--learning-rate'") from None
    store = Path(store_path) if store_path else Path(f"{Path(out_dir)}.features.safetensors")
    try:
        run = train_artifact(base_dir=base_dir, examples=read_dataset(data_path), out_dir=out_dir, store_path=store,
                             kind=kind, config=config,
                             target_risk=target_risk, delta=delta, warm_start_dir=warm_start_dir,
                             sequence_budget=sequence_budget, progress=_progress)
    except LayaError as exc:
        raise click.ClickException(str(exc)) from None
    _summary(run, out_dir)


def _summary(run, out_dir: str) -> None:
    store = "reused" if run.store_reused else "built"
    click.echo(f"feature store  {store} {run.store_path}")
    click.echo(f"head           {run.head.kind}, {len(run.tasks)} task(s), trained on {run.train_examples} "
               f"train examples, digest {run.head.digest}")
    for name, result in run.tasks.items():
        fit, cert = result.fit, result.certificate
        click.echo(f"task {name}")
        recorded = run.head.tasks[name].calibration  # the bounds as exported in head.json
        click.echo(f"  temperature  {fit.temperature:.4f}  (dev_cal, {fit.examples} examples: "
                   f"{fit.outcome.replace('_', ' ')}; bounds [{recorded.temperature_min:g}, "
                   f"{recorded.temperature_max:g}], fitted from {recorded.min_examples} examples)")
        if fit.warning:
            click.echo(f"  WARNING      {fit.warning}")
        click.echo(f"  NLL          {fit.nll_before:.4f} -> {fit.nll_after:.4f}")
        click.echo(f"  ECE          {fit.ece_before:.4f} -> {fit.ece_after:.4f}")
        if cert.certified:
            click.echo(f"  threshold    act when top probability >= {cert.threshold:g}  (certified on dev_conf, "
                       f"{cert.examples} examples)")
            click.echo(f"  coverage     {cert.coverage:.1%} ({cert.acted} acted, {cert.errors} errors)")
            click.echo(f"  bound        error rate among acted <= {cert.risk_upper_bound:.4f} with confidence "
                       f"{1 - cert.delta:g} (target {cert.target_risk:g}; Clopper-Pearson, fixed sequence)")
        else:
            click.echo(f"  threshold    NONE certified for target {cert.target_risk:g} at confidence "
                       f"{1 - cert.delta:g} on dev_conf ({cert.examples} examples): this task escalates everything")
    click.echo(f"artifact       {out_dir} (attaches to the base; guarantees hold for this head alone)")


if __name__ == "__main__":
    train()
