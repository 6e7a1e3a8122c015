"""The `tfaccel` command line: parses arguments and calls the library (no TensorFlow at import)."""

from __future__ import annotations

import atexit
import functools
import glob
import json
import os
import shlex
import signal
import sys
import threading
import time
import traceback

import click

from tfaccel import datasets
from tfaccel._version import __version__
from tfaccel.cli.open_ports import open_ports_note
from tfaccel.errors import Preempted, Stopped, TfaccelError, UserInputError
from tfaccel.quiet_import import quiet_tensorflow

EXIT_RUNTIME_FAILURE = 1
EXIT_USER_ERROR = 2
EXIT_INTERRUPTED = 130

RECIPE_ARGUMENT = click.argument(
    "recipe", type=click.Path(dir_okay=False, path_type=str), metavar="RECIPE")
SET_OPTION = click.option(
    "--set", "overrides", multiple=True, metavar="KEY=VALUE",
    help="Override one recipe key, e.g. --set training.epochs=3 (value parsed as YAML, "
         "checked like the file's own values). Repeatable.")


def resume_command(run_dir) -> str:
    """The command that continues a stopped run: its real path, quoted for a shell.

    A worker that does not know the run directory (a non-chief started by hand) names it
    as the chief's.
    """
    if not run_dir:
        return "tfaccel train --resume RUN_DIR (the chief's run directory)"
    return f"tfaccel train --resume {shlex.quote(str(run_dir))}"


def handle_errors(command):
    """Turns tfaccel's errors into a one-paragraph message and the documented exit code."""

    @functools.wraps(command)
    def wrapper(*args, **kwargs):
        try:
            return command(*args, **kwargs)
        except UserInputError as error:
            click.echo(f"Error: {error}", err=True)
            sys.exit(EXIT_USER_ERROR)
        except Preempted as error:
            # A checkpoint was saved; the shell's 128 + signal convention.
            click.echo(f"Error: {error}", err=True)
            click.echo(f"Resume with: {resume_command(error.run_dir)}", err=True)
            sys.exit(128 + int(error.signum))
        except Stopped as error:  # before training: nothing to resume
            click.echo(f"Error: {error}", err=True)
            sys.exit(128 + int(error.signum))
        except TfaccelError as error:
            click.echo(f"Error: {error}", err=True)
            sys.exit(EXIT_RUNTIME_FAILURE)
        except KeyboardInterrupt:
            click.echo("Interrupted; everything written so far is kept.", err=True)
            sys.exit(EXIT_INTERRUPTED)
        except (click.exceptions.Exit, click.ClickException, SystemExit):
            raise
        except BrokenPipeError:
            # The reader went away (`tfaccel keys | head -5`): click's own rule, as for
            # `tfaccel --help | head -1`: no message, stdout silenced, exit code 1.
            raise
        except Exception as error:  # an unexpected runtime failure: say it, keep it short
            if os.environ.get("TFACCEL_DEBUG"):
                traceback.print_exc()
            first_line = str(error).strip().splitlines()[0] if str(error).strip() else ""
            click.echo(f"Error: {type(error).__name__}: {first_line} (set TFACCEL_DEBUG=1 "
                       "to see the traceback).", err=True)
            sys.exit(EXIT_RUNTIME_FAILURE)

    return wrapper


@click.group(context_settings={"help_option_names": ["-h", "--help"]})
@click.version_option(__version__, "--version", prog_name="tfaccel",
                      message="%(prog)s %(version)s")
@click.option("--verbose", is_flag=True,
              help="Show TensorFlow's own start-up and C++ log lines, TFDS' and the "
                   "export converters' output (hidden unless TF_CPP_MIN_LOG_LEVEL is "
                   "set; TFACCEL_VERBOSE=1 does the same, and launched workers inherit "
                   "it).")
def main(verbose):
    """tfaccel: fast, correct TensorFlow/Keras training from a YAML recipe.

    Start with `tfaccel train recipes/default.yaml`; see `tfaccel COMMAND --help`.
    Exit codes: 0 success, 1 runtime failure, 2 a mistake in the input, 130 interrupted
    (Ctrl-C), 143 preempted (SIGTERM); after 130/143 a checkpoint was saved: resume with
    `tfaccel train --resume RUN_DIR`.
    """
    quiet_tensorflow(verbose_flag=verbose)


def _parse_steps(value):
    """`START:END` -> (start, end), 1 <= START <= END; else a usage error (exit 2)."""
    if value is None:
        return None
    parts = value.split(":")
    try:
        start, end = (int(p) for p in parts) if len(parts) == 2 else (None, None)
    except ValueError:
        start = end = None
    if start is None or start < 1 or end < start:
        raise click.BadParameter(
            f"expected START:END with 1 <= START <= END (optimizer steps counted from 1), "
            f"got {value!r}; for example --profile 10:15.", param_hint="--profile")
    return start, end


@main.command()
@click.argument("recipe", required=False, metavar="[RECIPE]",
                type=click.Path(dir_okay=False, path_type=str))
@SET_OPTION
@click.option("--run-dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Write the run here instead of a new folder under runtime.runs_dir. "
                   "Must not exist yet or be empty.")
@click.option("--resume", "resume_dir", type=click.Path(file_okay=False, path_type=str),
              default=None, metavar="RUN_DIR",
              help="Continue RUN_DIR in place from its newest good checkpoint (RECIPE may be "
                   "omitted; only --set training.epochs=N may change, to extend the run).")
@click.option("--profile", "profile", default=None, metavar="START:END",
              callback=lambda ctx, param, value: _parse_steps(value),
              help="Write a TensorBoard profiler trace of optimizer steps START to END "
                   "(counted from 1, inclusive) into RUN_DIR/tensorboard; view it in "
                   "TensorBoard's Profile tab (pip install 'tfaccel[profile]').")
@click.option("--timings", is_flag=True,
              help="At the end, print where the wall time went, phase by phase from the "
                   "process's start: start-up and imports, the recipe, data and model "
                   "builds, each epoch's first (tracing) calls, training, validation and "
                   "checkpoints, the steps_per_execution choice, the final save "
                   "(summary.json's timings hold the run's own phases in any case).")
@handle_errors
def train(recipe, overrides, run_dir, resume_dir, profile, timings):
    """Train the model RECIPE describes and leave a run directory.

    The run directory holds the resolved recipe.yaml, metrics.jsonl, summary.json,
    checkpoints/, tensorboard/ and the trained model.keras. SIGTERM or Ctrl-C saves a
    checkpoint at the next step and exits (143 or 130); `--resume RUN_DIR` continues it.
    """
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.config.recipe import load_recipe
    from tfaccel.training.fit_callbacks.timings import PhaseTimes, process_start

    started = process_start()
    clock = PhaseTimes(origin=started)
    clock.mark("start: Python and tfaccel's command line")

    if recipe is None and resume_dir is None:
        raise click.UsageError("give a RECIPE to train, or --resume RUN_DIR to continue a run.")
    # Deferred: ~2 ms; --help loads click alone.
    from tfaccel.training.run_dir.run_files import check_resume_target

    check_resume_target(run_dir=run_dir, resume=resume_dir)
    loaded = load_recipe(recipe, overrides) if recipe is not None else None
    if loaded is not None:
        # Deferred: ~10 ms (python_refs, the sources table); --help loads click alone.
        from tfaccel.config.input_paths import check_input_paths

        check_input_paths(loaded, source=recipe)  # before TensorFlow: a missing path is quick
    clock.mark("read and check the recipe")
    # Deferred: TensorFlow (seconds); --help loads click alone.
    from tfaccel.training.distributed.stuck_signals import exit_when_stuck
    from tfaccel.training.run import runner

    clock.mark("import TensorFlow, Keras and tfaccel's trainer")
    # A signal that finds the run blocked inside TensorFlow ends it cleanly (not kill -9).
    exit_when_stuck()
    if resume_dir is not None:
        result = runner.train(loaded, () if loaded is not None else overrides,
                              resume=resume_dir, profile=profile)
    else:
        result = runner.train(loaded, run_dir=run_dir, profile=profile)
    returned = time.perf_counter()
    click.echo(result.summary_text())
    if timings:
        _print_timings(clock, result.summary, returned=returned,
                       known_start=started is not None)
    if _is_the_console_script():
        exit_without_teardown(0)


def _is_the_console_script() -> bool:
    """Whether this process is `tfaccel` itself (not a test's CliRunner or a caller's
    Python: their process goes on after the command)."""
    return os.path.basename(sys.argv[0]) == "tfaccel"


def exit_without_teardown(code: int) -> None:
    """Ends a finished process without the interpreter's teardown, when that is safe.

    After TensorFlow and Keras were imported, Python's teardown (freeing every module and
    object, then TensorFlow's C++ destructors) took 6-10 s on a loaded 2-core CPU (0.1-0.4 s
    with `os._exit`), on top of a 4-epoch job: time a user waits for nothing. The atexit
    functions still run (logging's flush, multiprocessing ending its children, anything a
    user's code registered), then stdout and stderr are flushed, and only the freeing is
    skipped. Every file of the run is already written and closed (atomically). With a
    non-daemon thread still running, whose end a normal exit would wait for, it returns and
    the normal exit follows.

    Args:
        code: The process's exit code.
    """
    main = threading.main_thread()
    if any(t.is_alive() and not t.daemon and t is not main for t in threading.enumerate()):
        return
    atexit._run_exitfuncs()  # what CPython calls at exit (once here: os._exit follows)
    for stream in (sys.stdout, sys.stderr):
        try:
            stream.flush()
        except (OSError, ValueError):  # a closed or broken pipe: nothing more to say
            pass
    os._exit(code)


def _print_timings(clock, summary: dict, *, returned: float, known_start: bool) -> None:
    """`train --timings`: the command's phases with the run's own (summary.json's) inside."""
    # Deferred with train's own imports: --help loads click alone.
    from tfaccel.training.fit_callbacks.timings import timings_text

    run = summary.get("timings") or {"phases": []}
    clock.extend([[p["phase"], p["seconds"]] for p in run["phases"]], prefix="train: ",
                 rest="train: summary.json, closing the run", upto=returned)
    clock.mark("print the summary")
    click.echo(timings_text(clock.phases, wall=time.perf_counter() - clock.origin,
                            origin="the process's start" if known_start
                            else "the train command's start"))


@main.command(context_settings={"ignore_unknown_options": True})
@click.option("--workers", type=click.IntRange(min=1), default=None,
              help="Start this many workers on this machine (127.0.0.1, free ports).")
@click.option("--hosts", default=None, metavar="HOST:PORT,...",
              help="Every worker of a cluster, in order (worker 0 is the chief); run the "
                   "same command on each machine with its own --index.")
@click.option("--index", type=click.IntRange(min=0), default=None,
              help="This machine's position in --hosts.")
@click.option("--port", type=click.IntRange(min=1, max=65535), default=None,
              help="Under SLURM: the port each task listens on (tasks sharing a node use "
                   "the next ones). Default 12345.")
@click.option("--ps", type=click.IntRange(min=1), default=None,
              help="A parameter-server cluster (runtime.strategy parameter_server): this "
                   "many ps tasks. With --workers: chief, ps and workers on this machine; "
                   "with --hosts or SLURM the hosts are in the order chief, ps..., "
                   "workers....")
@click.option("--restarts", type=click.IntRange(min=0), default=None,
              help="With --ps and --workers: start a worker task that dies again at its "
                   "address, up to this many times per worker (0: never). Default 3.")
@click.argument("train_args", nargs=-1, type=click.UNPROCESSED, metavar="-- train ...")
@handle_errors
def launch(workers, hosts, index, port, ps, restarts, train_args):
    """Run `tfaccel train` as one job on several workers (MultiWorkerMirroredStrategy).

    \b
    This machine, 2 workers:  tfaccel launch --workers 2 -- train RECIPE [--set ...]
    Each machine of a cluster: tfaccel launch --hosts a:2222,b:2222 --index I -- train ...
    Under SLURM (srun, one task per worker): tfaccel launch -- train RECIPE
    Resume:                   tfaccel launch --workers 2 -- train --resume RUN_DIR

    Each worker gets its TF_CONFIG; worker 0 (the chief) alone writes the run directory.
    Output lines are prefixed [w0], [w1], ... A worker that fails stops the others; the
    exit code is the first failing worker's (0 when all succeed). SIGTERM is passed on to
    every worker: they checkpoint at the same step and exit 143. Each worker's TensorFlow
    gRPC server listens on its port on every network interface (even for --workers),
    without authentication: use a trusted network or a firewall.

    \b
    Parameter servers (asynchronous; recipe runtime.strategy parameter_server):
      tfaccel launch --ps 1 --workers 2 -- train RECIPE
    A lost worker is tolerated (its steps are re-run elsewhere) and started again at its
    address (--restarts, default 3 per worker); a lost ps stops the run.
    """
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.cli import launch as launcher
    from tfaccel.cli import tf_configs
    from tfaccel.config.recipe import load_recipe

    if workers is not None and (hosts is not None or index is not None):
        raise click.UsageError("give --workers (this machine) or --hosts with --index "
                               "(a cluster), not both.")
    if (hosts is None) != (index is None):
        raise click.UsageError("--hosts and --index go together (this machine's position "
                               "in the host list).")
    if restarts is not None and (ps is None or workers is None):
        raise click.UsageError("--restarts goes with --ps and --workers (a parameter-server "
                               "cluster on this machine, whose worker tasks it restarts).")
    command = parse_train_command(train_args)
    if ps is not None and command.recipe is not None:
        strategy = load_recipe(command.recipe, command.overrides).runtime.strategy
        if strategy != "parameter_server":
            raise UserInputError(
                f"--ps starts a parameter-server cluster, but the recipe's runtime.strategy "
                f"is {strategy!r}; set runtime.strategy: parameter_server (or --set "
                "runtime.strategy=parameter_server).")
    if workers is not None:
        prepared = launcher.prepare_train_args(command, choose_run_dir=True)
        if ps is not None:
            sys.exit(launcher.run_parameter_server_local(
                prepared, ps=ps, workers=workers,
                restarts=launcher.DEFAULT_RESTARTS if restarts is None else restarts))
        sys.exit(launcher.run_local(prepared, workers=workers))
    if hosts is not None:
        host_list = tf_configs.parse_hosts(hosts)
        tf_configs.tf_config(host_list, index)  # checks --index against the list first
    elif tf_configs.in_slurm_job():
        host_list, index = tf_configs.slurm_cluster(port=port or tf_configs.DEFAULT_SLURM_PORT)
    else:
        raise click.UsageError("give --workers N, or --hosts and --index, or run under "
                               "SLURM (srun) so the cluster comes from its variables.")
    prepared = launcher.prepare_train_args(command, choose_run_dir=False)
    if ps is not None:
        sys.exit(launcher.run_parameter_server_node(prepared, hosts=host_list, index=index,
                                                    ps=ps))
    sys.exit(launcher.run_node(prepared, hosts=host_list, index=index))


def parse_train_command(args):
    """The ``train ...`` after a launch's ``--``, parsed by `train`'s own options.

    Args:
        args: The words after ``--``, ``train`` first.

    Returns:
        A `tfaccel.cli.launch.TrainCommand` for the launcher.

    Raises:
        UserInputError: Not a ``train`` command, or its options are wrong.
    """
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.cli.launch import TrainCommand

    args = list(args)
    if not args or args[0] != "train":
        raise UserInputError(
            f"launch runs `train` on every worker: write `tfaccel launch ... -- train RECIPE "
            f"[--set ...]`; got {' '.join(args) or 'nothing'!r} after `--`.")
    try:
        params = train.make_context("train", args[1:]).params
    except click.ClickException as error:
        raise UserInputError(f"the train arguments after `--` are wrong: "
                             f"{error.format_message()}") from None
    return TrainCommand(args=args, recipe=params["recipe"],
                        overrides=tuple(params["overrides"]), run_dir=params["run_dir"],
                        resume_dir=params["resume_dir"])


def _table_plan_lines(data, *, seed: int) -> list:
    """A csv recipe's column plan (`tfaccel.reading.table_plan`) over its training split, as
    the run makes it: data.path's files, less the files or rows data.validation_fraction
    holds out (drawn with the recipe's seed, by `tfaccel.reading.split_rule`)."""
    if data.source != "csv" or not data.path:
        return []
    # Deferred: numpy (~0.1 s); --help loads click alone.
    from tfaccel.reading import split_rule, table_plan

    files = sorted(glob.glob(data.path))
    fraction = 0 if data.validation_path else data.validation_fraction
    keep, which = None, f"all {len(files)} file(s) of data.path"
    if fraction and split_rule.whole_files(len(files), fraction):
        chosen, _ = split_rule.split_order(
            len(files), split_rule.held_out(len(files), fraction), seed)
        which = f"the {len(chosen)} training file(s) of {len(files)} of data.path"
        files = [files[i] for i in chosen]
    elif fraction:
        counts = table_plan.count_rows(files, data=data)
        masks, _ = split_rule.row_masks(counts, split_rule.held_out(sum(counts), fraction),
                                        seed)
        kept = dict(zip(files, masks))
        keep = lambda path, index: bool(kept[path][index])
        which = (f"the training rows of data.path's {len(files)} file(s), "
                 f"data.validation_fraction {fraction} held out with seed {seed}")
    scan, _, plan = table_plan.plan_for(files, data=data, keep=keep)
    return table_plan.show(plan, rows=scan.rows) + [f"(the plan of {which}, as the run makes "
                                                    "it)"]


@main.command()
@RECIPE_ARGUMENT
@SET_OPTION
@click.option("--show", is_flag=True, help="Print the resolved recipe (every key) as YAML, and "
              "a table's column plan (csv: read with tfaccel's reader, no TensorFlow).")
@handle_errors
def validate(recipe, overrides, show):
    """Check RECIPE without TensorFlow: keys, types, ranges, that input paths exist, that
    data.validation_fraction leaves examples on both sides (files split by rows), your own
    model, optimizer, loss and metric callables and their params (read from their source, not
    imported), and the params of Keras' optimizers, schedules, losses and metrics (from a
    table of their signatures)."""
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.config.input_paths import check_input_paths
    from tfaccel.config.recipe import dump_recipe, load_recipe
    from tfaccel.config.split_check import check_split
    from tfaccel.training.keras_objects.code_checks import check_own_code

    loaded = load_recipe(recipe, overrides)
    check_input_paths(loaded, source=recipe)
    check_own_code(loaded)
    unchecked = check_split(loaded, source=recipe)
    if show:
        click.echo(dump_recipe(loaded), nl=False)
        for line in _table_plan_lines(loaded.data, seed=loaded.seed):
            click.echo(f"# {line}")
    else:
        click.echo(f"{recipe}: OK ({loaded.data.source} data, model {loaded.model.path or loaded.model.name}, "
                   f"{loaded.training.epochs} epoch(s), global batch "
                   f"{loaded.training.global_batch_size})."
                   + (f" Not checked: {unchecked}" if unchecked else ""))


@main.command()
@RECIPE_ARGUMENT
@SET_OPTION
@click.option("--batches", type=click.IntRange(min=1), default=50, show_default=True,
              help="Batches timed per steady-state measurement.")
@click.option("--repeats", type=click.IntRange(min=1), default=2, show_default=True,
              help="Alternating runs of each contender; the best of each is kept.")
@click.option("--no-epochs", is_flag=True,
              help="Skip timing a cold and a second (cached) full epoch.")
@handle_errors
def bench(recipe, overrides, batches, repeats, no_epochs):
    """Benchmark RECIPE's input pipeline alone (no model).

    Reports the steady examples/s (the batches after the first) and the first batch's
    latency for tfaccel's pipeline and for the same source through a truly sequential
    tf.data pipeline; the headline ratio is of the steady rates, the latencies beside it.
    Then a cold epoch versus a second (cached) epoch.
    """
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.config.recipe import load_recipe

    loaded = load_recipe(recipe, overrides)
    # Deferred: ~2 ms; --help loads click alone.
    from tfaccel.tools.bench import bench_data_config, format_table

    result = bench_data_config(loaded.data, global_batch_size=loaded.training.global_batch_size,
                               seed=loaded.seed, num_batches=batches, epochs=not no_epochs,
                               repeats=repeats)
    click.echo(format_table(result))


@main.command("export")
@click.argument("run_dir", type=click.Path(path_type=str), metavar="RUN_DIR")
@click.option("--format", "export_format", required=True, metavar="FORMAT",
              help="saved_model, litert, onnx or keras.")
@click.option("--quantize", default="none", show_default=True, metavar="MODE",
              help="none, dynamic, float16 or int8 (int8: full-integer, calibrated on a few "
                   "hundred training examples; litert keeps the input preprocessing before "
                   "the first layer with weights in float32; with keras/saved_model, Keras' "
                   "model.quantize('int8')).")
@click.option("--out", default=None, type=click.Path(path_type=str),
              help="Folder to create for the export and its export.json (must not exist); "
                   "default RUN_DIR/exports/FORMAT-MODE plus the options that change the "
                   "export (-outside, -per-tensor, -strip, -calibration-N), e.g. "
                   "litert-int8-per-tensor-strip.")
@click.option("--preprocessing", default="inside", show_default=True, metavar="WHERE",
              help="inside: the whole model, raw pixels in. outside: the model from its "
                   "first layer with weights on; the leading weightless layers (tfaccel's "
                   "models: rescaling and per-image standardisation) go to "
                   "preprocessing.keras beside it, and the export takes their output.")
@click.option("--per-tensor", is_flag=True,
              help="int8 (litert, onnx): one scale per weight tensor instead of per output "
                   "channel (smaller; the report measures the accuracy).")
@click.option("--strip", is_flag=True,
              help="litert: leave out tensor names, signatures and conversion metadata "
                   "(in the export and in the float file it is compared with).")
@click.option("--calibration-examples", type=click.IntRange(min=1), default=300,
              show_default=True, help="Training examples int8 calibration reads.")
@click.option("--latency-runs", type=click.IntRange(min=1), default=5, show_default=True,
              help="Alternating single-example timing runs of the export and the float "
                   "model; the best of each is kept.")
@handle_errors
def export(run_dir, export_format, quantize, out, preprocessing, per_tensor, strip,
           calibration_examples, latency_runs):
    """Export RUN_DIR's model.keras and check the export against the float model.

    The export is loaded back with its own runtime (LiteRT, ONNX Runtime, TensorFlow,
    Keras) and run on the run's validation split next to the float model exported in the
    same format; sizes, accuracies, top-1 agreement and single-example CPU latencies are
    printed and written to OUT/export.json. LiteRT and ONNX need `pip install
    'tfaccel[export]'`.
    """
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.tools.export import check_arguments, check_out_is_free, default_out

    # A wrong format or mode, or a folder already taken, is reported before TensorFlow loads.
    check_arguments(format=export_format, quantize=quantize, preprocessing=preprocessing,
                    per_tensor=per_tensor, strip=strip)
    check_out_is_free(out if out is not None else default_out(
        run_dir, format=export_format, quantize=quantize, preprocessing=preprocessing,
        per_tensor=per_tensor, strip=strip, calibration_examples=calibration_examples))
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.tools.export import export as run_export
    from tfaccel.tools.export import format_report

    report = run_export(run_dir, format=export_format, quantize=quantize, out=out,
                        preprocessing=preprocessing, per_tensor=per_tensor, strip=strip,
                        calibration_examples=calibration_examples, latency_runs=latency_runs)
    click.echo(format_report(report))


@main.command()
@RECIPE_ARGUMENT
@SET_OPTION
@click.option("--steps", type=click.IntRange(min=2), default=20, show_default=True,
              help="Steps timed in each measurement (after as many warm-up steps).")
@click.option("--repeats", type=click.IntRange(min=1), default=2, show_default=True,
              help="Alternating measurements of the model alone and fit; best of each kept.")
@click.option("--try", "try_suggestions", is_flag=True,
              help="Also measure the cheap suggestions (pipeline or model alone with the "
                   "suggested setting) and report the measured change.")
@click.option("--json", "as_json", is_flag=True, help="Print one JSON object instead.")
@handle_errors
def doctor(recipe, overrides, steps, repeats, try_suggestions, as_json):
    """Say whether RECIPE's training is input-bound or compute-bound, and what to change.

    Measures side by side: the input pipeline alone, the model alone on batches already in
    memory, and both together as `fit` runs them, with the share of step time spent waiting
    for input (verdict thresholds as in the TensorFlow profiler: under 5% compute-bound,
    5-20% moderately input-bound, 20% or more input-bound).
    """
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.config.recipe import load_recipe

    loaded = load_recipe(recipe, overrides)  # a recipe mistake is named before TensorFlow
    # Deferred: TensorFlow (seconds); --help loads click alone.
    from tfaccel.messages import say
    from tfaccel.tools.doctor import diagnose
    from tfaccel.tools.doctor_report import format_report

    # Progress on stdout beside the report; with --json on stderr, so stdout is the JSON.
    progress = (lambda line: click.echo(f"tfaccel: {line}", err=True)) if as_json else say
    report = diagnose(loaded, steps=steps, repeats=repeats, try_suggestions=try_suggestions,
                      progress=progress)
    if as_json:

        click.echo(json.dumps(report, indent=2, default=float))
    else:
        click.echo(format_report(report))


@main.command()
@click.argument("run_dirs", nargs=-1, required=True, metavar="RUN_DIR...",
                type=click.Path(file_okay=False, path_type=str))
@click.option("--plot", "plot_path", default="compare.png", show_default=True,
              type=click.Path(dir_okay=False, path_type=str),
              help="Where to write the PNG of loss, the runs' first metric (accuracy, "
                   "mae, ...) and examples/s curves.")
@click.option("--no-plot", is_flag=True, help="Print the table only.")
@handle_errors
def compare(run_dirs, plot_path, no_plot):
    """Compare runs: the settings that differ, final metrics and throughput, and a PNG.

    The PNG needs matplotlib (pip install 'tfaccel[plot]'); without it the table is printed
    with a line saying so.
    """
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.tools.compare import compare as compare_runs

    result = compare_runs(run_dirs, plot_path=None if no_plot else plot_path)
    click.echo(result["table"])
    if result["plot"]:
        curves = ", ".join(f"{k} {v}" for k, v in result["curves"].items())
        click.echo(f"\nCurves written to {result['plot']} ({curves} curves).")
    elif result["note"]:
        click.echo("\n" + result["note"])


@main.command("export-images")
@click.argument("out_dir", type=click.Path(file_okay=False, path_type=str))
@click.option("--dataset", default=datasets.NAME, show_default=True,
              help="TFDS dataset to export (prepared; the built-in one is prepared on use).")
@click.option("--split", default="train", show_default=True, help="TFDS split expression.")
@click.option("--limit", type=click.IntRange(min=1), default=None,
              help="Write at most this many images.")
@click.option("--data-dir", default=None, type=click.Path(file_okay=False, path_type=str),
              help="TFDS data directory (TFDS's default when omitted).")
@click.option("--format", "image_format", type=click.Choice(["png", "jpg"]), default="png",
              show_default=True, help="Image file format.")
@handle_errors
def export_images(out_dir, dataset, split, limit, data_dir, image_format):
    """Write a TFDS dataset as OUT_DIR/<class>/<n>.png, the layout `image_folder` reads.

    With the defaults it exports the built-in dataset, so the image-folder source can be
    tried at once: `tfaccel export-images shapes_images --limit 2000`.
    """
    # Deferred: TensorFlow (seconds); --help loads click alone.
    from tfaccel.data.image_folder_writer import export_image_folder

    result = export_image_folder(out_dir, dataset=dataset, split=split, limit=limit,
                                 data_dir=data_dir, image_format=image_format,
                                 download=dataset.startswith("tfaccel_"))
    per_class = ", ".join(f"{k} {v}" for k, v in result["per_class"].items())
    click.echo(f"Wrote {result['images']} images to {result['out_dir']} ({per_class}).")


@main.command()
@click.option("--markdown", is_flag=True, help="Print a Markdown table (as in the README).")
@click.option("--json-schema", "json_schema", is_flag=True,
              help="Print the recipe's JSON Schema, for editors that complete and check "
                   "recipes as they are typed (the YAML language server).")
@handle_errors
def keys(markdown, json_schema):
    """List every recipe key with its default and meaning."""
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.config.recipe import describe_keys

    if json_schema:

        # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
        from tfaccel.config.schema import json_schema as schema

        click.echo(json.dumps(schema(), indent=2))
        return
    if markdown:
        click.echo("| key | default | meaning |\n|---|---|---|")
    for key, default, help_text in describe_keys():
        if markdown:
            shown = f"`{default}`" if default else ""
            click.echo(f"| `{key}` | {shown} | {help_text.replace('|', '/')} |")
        else:
            click.echo(f"{key:34} {default or '-':24} {help_text}")


@main.group("data-service")
def data_service():
    """Run a tf.data service: a dispatcher and workers that preprocess for trainers.

    Start one dispatcher, then workers on any machines, then train with
    `--set data.service.dispatcher=HOST:PORT`. Each command serves until Ctrl-C or
    SIGTERM and then exits with code 0. Their ports are open on every network interface
    without authentication (TensorFlow takes no bind address), and the workers run any
    pipeline a client sends: use them inside a trusted network or behind a firewall.
    """


def _say_open_port(server: str, port: int, *, runs: str) -> None:
    # After the address line, which scripts read first; the address says localhost, but
    # TensorFlow listens on every interface.

    click.echo(f"tfaccel: {open_ports_note(server=server, ports=[port], runs=runs)}")


def _serve(server, what: str) -> None:
    # Deferred: TensorFlow (seconds); --help loads click alone.
    from tfaccel.data.service import serve_until_stopped

    signum = serve_until_stopped(server)

    click.echo(f"tfaccel: {what} stopped ({signal.Signals(signum).name}).")


@data_service.command("dispatcher")
@click.option("--port", type=click.IntRange(0, 65535), default=5050, show_default=True,
              help="Port to listen on, on every network interface (TensorFlow takes no "
                   "bind address); 0 picks a free one; the address is printed.")
@click.option("--work-dir", type=click.Path(file_okay=False, path_type=str), default=None,
              help="Folder where the dispatcher journals its state, so a restarted "
                   "dispatcher recovers its jobs (TensorFlow's fault-tolerant mode).")
@handle_errors
def data_service_dispatcher(port, work_dir):
    """Start a tf.data service dispatcher and serve until Ctrl-C / SIGTERM (exit 0)."""
    # Deferred: TensorFlow (seconds); --help loads click alone.
    from tfaccel.data.service import start_dispatcher

    server, address = start_dispatcher(port=port, work_dir=work_dir)
    bound = int(address.rsplit(":", 1)[1])
    click.echo(f"tfaccel: dispatcher listening on {address}; start workers with "
               f"`tfaccel data-service worker --dispatcher HOST:{bound}`.")
    _say_open_port("the tf.data service dispatcher", bound,
                   runs="its workers run any pipeline a client sends")
    sys.stdout.flush()
    _serve(server, "dispatcher")


@data_service.command("worker")
@click.option("--dispatcher", required=True, metavar="HOST:PORT",
              help="The dispatcher's address, HOST:PORT or grpc://HOST:PORT.")
@click.option("--port", type=click.IntRange(0, 65535), default=0, show_default=True,
              help="Port to listen on, on every network interface (TensorFlow takes no "
                   "bind address); 0 picks a free one.")
@click.option("--host", default="localhost", show_default=True,
              help="The name or address under which trainers reach this worker; give the "
                   "machine's name when trainers run elsewhere. It does not choose the "
                   "interface: TensorFlow listens on all of them.")
@handle_errors
def data_service_worker(dispatcher, port, host):
    """Start a tf.data service worker and serve until Ctrl-C / SIGTERM (exit 0)."""
    # Deferred: the recipe layer and yaml (~0.05-0.2 s); --help loads click alone.
    from tfaccel.config.recipe import parse_dispatcher_address

    try:
        parse_dispatcher_address(dispatcher)
    except UserInputError as error:
        raise UserInputError(f"--dispatcher: {error}") from None
    # Deferred: TensorFlow (seconds); --help loads click alone.
    from tfaccel.data.service import start_worker

    server, address = start_worker(dispatcher, port=port, host=host)
    bound = int(address.rsplit(":", 1)[1])
    click.echo(f"tfaccel: worker {address} listening on port {bound}, "
               f"serving dispatcher {parse_dispatcher_address(dispatcher)}.")
    _say_open_port("the tf.data service worker", bound,
                   runs="it runs any pipeline a client sends to its dispatcher")
    sys.stdout.flush()
    _serve(server, "worker")


@main.command()
@handle_errors
def models():
    """List the registered models and their parameters (with defaults)."""
    # Deferred: ~5 ms (the models package); --help loads click alone.
    from tfaccel.models.registry import model_names, model_params

    for name in model_names():
        params = ", ".join(f"{k}={v!r}" for k, v in model_params(name).items())
        click.echo(f"{name:22} {params}")


@main.command()
@handle_errors
def devices():
    """Show the devices TensorFlow sees and what strategy and precision `auto` would pick."""
    # Deferred: TensorFlow (seconds); --help loads click alone.
    from tfaccel.engine.strategy import auto_choices

    choices = auto_choices()
    for key, value in choices.items():
        if isinstance(value, (list, tuple)):
            value = ", ".join(str(v) for v in value) or "-"
        click.echo(f"{key:22} {value}")


if __name__ == "__main__":
    main()
