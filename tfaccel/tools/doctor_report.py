"""`tfaccel doctor`'s report as text: verdict, figures, the autotuner's choices, suggestions."""

from __future__ import annotations


def format_report(report: dict) -> str:
    """The report as text: verdict, figures, the autotuner's choices, suggestions."""
    lines = [f"Verdict: {report['verdict']} ({report['input_wait_fraction']:.1%} of the step "
             f"time waiting for input; {report['input_wait_source']})."]
    if report.get("augmentation_verdict"):
        lines.append(f"  {report['augmentation_verdict'][0].upper()}"
                     f"{report['augmentation_verdict'][1:]}")
    lines.append("")
    lines += [
        f"  input pipeline alone     {report['pipeline_examples_per_sec']:>10,.0f} examples/s",
        *([f"    without augmentation   "
           f"{report['pipeline_examples_per_sec_without_augment']:>10,.0f} examples/s"]
          if report.get("pipeline_examples_per_sec_without_augment") else []),
        f"  model alone (in memory)  {report['model_examples_per_sec']:>10,.0f} examples/s",
        f"  fit (both together)      {report['fit_examples_per_sec']:>10,.0f} examples/s",
        f"  step time {report['step_time_ms']:.1f} ms, CPU utilisation "
        f"{report['cpu_utilisation']:.0%}, per-call overhead "
        + (f"{report['framework_overhead_fraction']:.0%}"
           if report["framework_overhead_fraction"] is not None else "unmeasured")
        + f" ({report['steps_timed']} steps timed each, best of {report['repeats']})",
        ""]
    auto = (report.get("steps_per_execution") or {}).get("auto_choice")
    if auto is not None:
        lines[-1:-1] = [f"  steps per call: {report['steps_per_execution']['recipe']} in the "
                        f"recipe; auto picks {auto['steps']} here ({auto['reason']})"]
    autotune = report["autotune"]
    if "stages" in autotune:
        lines.append(f"tf.data autotuner (CPU budget {autotune['cpu_budget']}):")
        for stage in autotune["stages"]:
            chosen = ", ".join(f"{k} {v}" for k, v in stage.items()
                               if k not in ("stage", "ms_per_element", "buffered_elements"))
            timing = (f", {stage['ms_per_element']:.2f} ms/element"
                      if "ms_per_element" in stage else "")
            lines.append(f"  {stage['stage']:<22} {chosen}{timing}, "
                         f"{stage['buffered_elements']} buffered")
    else:
        lines.append(f"tf.data autotuner: not readable ({autotune['unavailable']}).")
    lines += ["", "Suggestions (most promising first):"]
    if not report["suggestions"]:
        lines.append("  none left to suggest.")
    for n, s in enumerate(report["suggestions"], 1):
        sets = " ".join(f"--set {o}" for o in s["set"])
        lines.append(f"  {n}. {sets}: {s['why']}; expected: {s['expected']}.")
        measured = s.get("measured")
        if measured:
            if "error" in measured:
                lines.append(f"     tried: failed ({measured['error']})")
            else:
                lines.append(f"     tried: {_tried(measured)}")
    slower = report.get("not_suggested") or []
    if slower:
        lines += ["", "Tried and measured slower here (not suggested):"]
        lines += [f"  --set {' --set '.join(s['set'])}: {_tried(s['measured'])}"
                  for s in slower]
    return "\n".join(lines)


def _tried(measured: dict) -> str:
    text = (f"{measured['what']} {measured['before']:,.0f} -> {measured['after']:,.0f} "
            f"({measured['ratio']:.2f}x")
    if measured.get("fit_gain") is not None:
        text += f"; about {measured['fit_gain']:.2f}x on fit"
    return text + ")"
