# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""The candidate-facing text of the reports and of the summary, in English and in Chinese.

`tr(lang, key, **values)` gives one string, formatted with `values`. Only the kit's own words
are here: headings, statuses, the summary's sentences. What a check
says (its message, its counterexample) and the grader's notes stay as the grader wrote them, in
English. Both tables have the same keys and the same placeholders (the kit's tests check it).
"""

from grader.parts import PARTS

LANGUAGES = ("en", "zh")

STRINGS = {
    "en": {
        # statuses, of checks and of the engine check
        "passed": "passed",
        "failed": "failed",
        "error": "error",
        "skipped": "skipped",
        # the page's and report.md's text
        "kicker": "PagedAttention interview kit: grade report",
        "title": "Grade report",
        "points": "points",
        "graded": (
            "Graded {started_at} in {seconds} s, profile {profile}, seed {seed}, on {device}."
        ),
        "intro": (
            "Each part of the exercise is worth a fixed number of points, shared among its checks "
            "in proportion to their weights, the same in every kit and on every machine. A check "
            "that cannot run here (it needs the hiring team's kit or a CUDA device) keeps its "
            "points: they are shown beside the part's score and left out of its maximum. A failed "
            "check shows the calls that break the submission, as Python code that replays them."
        ),
        "errors_heading": "The grader failed",
        "errors_intro": (
            "The score may be missing points for reasons that are not the submission's fault."
        ),
        "total": "Total",
        "parts_heading": "Parts",
        "part": "Part",
        "asks": "What it asks",
        "score": "Score",
        "checks": "Checks",
        "tally": "{passed} of {total} checks passed",
        "not_graded": "not graded",
        "provisional": "provisional",
        "counterexample": "Counterexample, as Python that replays the failure against your files:",
        "hypothesis": "Hypothesis notes",
        "traceback": "Traceback",
        "passed_list": "Passed:",
        "skipped_list": (
            "Skipped here, left out of the part's maximum (their points stay theirs, not shared "
            "out among the checks that ran):"
        ),
        "ungraded_full_kit": "graded by the hiring team's kit",
        "ungraded_cuda": "needs a CUDA device",
        "more_full_kit": "{points} more graded by the hiring team's kit",
        "more_elsewhere": "{points} more not graded here: {reason}",
        "skipped_check": "{points} points, {reason}",
        "timings_heading": "Timings",
        "timings_intro": (
            "Each timing runs the submission and the kit's reference solution on the same input, "
            "in the same rounds; the ratio is the candidate's time over the reference's, so 1 is "
            "as fast as the reference and lower is faster. Each has a limit on that ratio."
        ),
        "no_timings": "No timings in this run.",
        "benchmark": "Benchmark",
        "candidate": "Candidate",
        "reference": "Reference",
        "ratio": "Ratio",
        "verdict": "Verdict",
        "ratio_series": "candidate time / reference time (lower is faster)",
        "limit_series": "the limit on that ratio",
        "ratio_axis": "time / reference's",
        "ok": "ok (limit {limit})",
        "too_slow": "too slow (limit {limit})",
        "integrity_heading": "Integrity flags",
        "integrity_intro": (
            "What the grader's source scan and its sandboxed workers noticed, for a person to look "
            "at. They never change the score."
        ),
        "none": "None.",
        "integration_heading": "End-to-end engine check (not scored)",
        "integration_intro": (
            "A tiny transformer served through the submission's parts, from prompt to the last "
            "token. It earns no points: it shows whether the parts work together."
        ),
        "scheduling_heading": "Scheduling: tokens per step",
        "scheduling_intro": (
            "The submission's scheduler and static batching serve the same trace of {requests} "
            "requests ({num_blocks} blocks of {block_size} tokens, at most {max_num_seqs} "
            "sequences at once). Static batching waits for a whole batch to finish before it "
            "admits the next; continuous batching fills a finished request's seat at once. For "
            "information, not scored."
        ),
        "scheduling_chart": "Tokens generated per decode step",
        "simulation_heading": "Why paging and continuous batching win",
        "simulation_intro": (
            "The kit's own simulation (make simulate), the same for every submission: one trace "
            "of long-tailed requests served from one pool by static batching, by continuous "
            "batching over contiguous reservations (as in the vLLM paper's baselines) and over "
            "paged blocks of several sizes."
        ),
        "step": "decode step",
        "tokens_per_step": "tokens per step",
        "your_scheduler": "this scheduler",
        "static_batching": "static batching",
        "steps_taken": "{name}: {steps} steps, {tokens} tokens, {mean} tokens per step",
        "not_drained": "This scheduler did not finish every request of the trace.",
        "ignored_heading": "Ignored files",
        "ignored_intro": (
            "Files in the submission that are not among the files the exercise asks for; the "
            "grader did not read them."
        ),
        "environment_heading": "Environment",
        "submission_heading": "Submission",
        "file": "File",
        # the summary at the end of `make grade`
        "summary_total": "total",
        "first_look": "What to look at first:",
        "first_failure": "{title}: the check {name} {status}:",
        "more_failures": "({count} more checks did not pass in this part; all are in the report.)",
        "see_counterexample": "Its counterexample, as Python that replays the failure:",
        "more_lines": "... {count} more lines in the report",
        "where": "In the report: {path}#{anchor} (also report.md, under {title}).",
        "not_started": "Not implemented yet (a stub or a missing file): {parts}.",
        "all_passed": "Every graded check passed.",
        "grading": "Grading {submission} ({profile} profile)...",
        "provisional_note": "{part}: {note}",
        "integrity_count": "{count} integrity flag(s) for a reviewer: see the report.",
        "integration_line": "End-to-end engine check (not scored): {status}. {message}",
        "grader_failed": "The grader itself failed; the score may be incomplete:",
        "report_at": "Report: {path}  (also report.md, report.json)",
    },
    "zh": {
        "passed": "通过",
        "failed": "未通过",
        "error": "出错",
        "skipped": "跳过",
        "kicker": "PagedAttention 面试题包：评分报告",
        "title": "评分报告",
        "points": "分",
        "graded": (
            "评分于 {started_at}，用时 {seconds} 秒，"
            "profile {profile}，seed {seed}，设备 {device}。"
        ),
        "intro": (
            "每个部分有固定的分值，按各项检查的权重分配给它们，在每个题包、每台机器上都相同。"
            "无法在此运行的检查（需要招聘团队的完整题包或 CUDA 设备）保留自己的分值："
            "这些分数显示在该部分得分旁边，不计入它的满分。"
            "未通过的检查会给出让提交出错的调用序列，写成可以重放的 Python 代码。"
        ),
        "errors_heading": "评分器自身出错",
        "errors_intro": "得分可能因此少算了分数，原因不在提交本身。",
        "total": "总分",
        "parts_heading": "各部分",
        "part": "部分",
        "asks": "题目要求",
        "score": "得分",
        "checks": "检查",
        "tally": "{total} 项检查通过了 {passed} 项",
        "not_graded": "未评分",
        "provisional": "暂定分数",
        "counterexample": "反例：针对你的文件重放这次失败的 Python 代码：",
        "hypothesis": "Hypothesis 说明",
        "traceback": "调用栈（traceback）",
        "passed_list": "已通过：",
        "skipped_list": (
            "在此跳过，不计入该部分的满分（它们的分值保持不变，不分摊给已运行的检查）："
        ),
        "ungraded_full_kit": "由招聘团队的完整题包评分",
        "ungraded_cuda": "需要 CUDA 设备",
        "more_full_kit": "另有 {points} 分由招聘团队的完整题包评分",
        "more_elsewhere": "另有 {points} 分未在此评分：{reason}",
        "skipped_check": "{points} 分，{reason}",
        "timings_heading": "计时",
        "timings_intro": (
            "每项计时都在同一输入、同一轮次中分别运行提交和题包的参考实现；比值是你的耗时除以参考"
            "实现的耗时，1 表示与参考实现一样快，越小越快。每项计时对这个比值都有一个上限。"
        ),
        "no_timings": "本次运行没有计时。",
        "benchmark": "计时项",
        "candidate": "提交",
        "reference": "参考实现",
        "ratio": "比值",
        "verdict": "结论",
        "ratio_series": "提交耗时 / 参考实现耗时（越小越快）",
        "limit_series": "该比值的上限",
        "ratio_axis": "耗时 / 参考实现",
        "ok": "通过（上限 {limit}）",
        "too_slow": "太慢（上限 {limit}）",
        "integrity_heading": "完整性标记",
        "integrity_intro": (
            "评分器的源码扫描和沙箱中的工作进程注意到的情况，供人工查看。它们从不影响得分。"
        ),
        "none": "无。",
        "integration_heading": "端到端引擎检查（不计分）",
        "integration_intro": (
            "用提交的各个部分驱动一个很小的 transformer，从 prompt 一直生成到最后一个 token。"
            "这项检查不计分：它显示各部分能否协同工作。"
        ),
        "scheduling_heading": "调度：每步生成的 token 数",
        "scheduling_intro": (
            "提交的调度器和静态批处理处理同一条包含 {requests} 个请求的轨迹（{num_blocks} 个块，"
            "每块 {block_size} 个 token，同时最多 {max_num_seqs} 个序列）。静态批处理要等整批结束"
            "才准入下一批；连续批处理在请求结束时立即补上空位。仅供参考，不计分。"
        ),
        "scheduling_chart": "每个 decode 步生成的 token 数",
        "simulation_heading": "为什么分页和连续批处理更好",
        "simulation_intro": (
            "评分套件自己的模拟（make simulate），对每份提交都相同："
            "同一条长尾请求轨迹、同一个缓存池，分别用静态批处理、"
            "基于连续预留的连续批处理（vLLM 论文中的基线）"
            "和基于不同块大小分页的连续批处理来服务。"
        ),
        "step": "decode 步",
        "tokens_per_step": "每步 token 数",
        "your_scheduler": "本调度器",
        "static_batching": "静态批处理",
        "steps_taken": "{name}：{steps} 步，{tokens} 个 token，平均每步 {mean} 个 token",
        "not_drained": "本调度器没有完成轨迹中的所有请求。",
        "ignored_heading": "被忽略的文件",
        "ignored_intro": "提交中不属于题目要求的文件；评分器没有读取它们。",
        "environment_heading": "运行环境",
        "submission_heading": "提交",
        "file": "文件",
        "summary_total": "总分",
        "first_look": "先看这里：",
        "first_failure": "{title}：检查 {name} {status}：",
        "more_failures": "（这一部分还有 {count} 项检查没有通过，都在报告里。）",
        "see_counterexample": "它的反例（重放这次失败的 Python 代码）：",
        "more_lines": "……报告中还有 {count} 行",
        "where": "报告中的位置：{path}#{anchor}（report.md 中在“{title}”下）。",
        "not_started": "尚未实现（仍是桩代码或缺少文件）：{parts}。",
        "all_passed": "所有评分的检查都通过了。",
        "grading": "正在评分 {submission}（{profile} 配置）……",
        "provisional_note": "{part}：{note}",
        "integrity_count": "有 {count} 个完整性标记需要人工查看：见报告。",
        "integration_line": "端到端引擎检查（不计分）：{status}。{message}",
        "grader_failed": "评分器自身出错，得分可能不完整：",
        "report_at": "报告：{path}（另有 report.md、report.json）",
    },
}


# Why a skipped check's points are not graded here, by how its skip message starts.
UNGRADED = {
    "runs only in the full kit": "ungraded_full_kit",
    "needs a CUDA device": "ungraded_cuda",
}


def ungraded_reason(lang: str, message: str) -> str:
    """Why a check skipped with `message` is not graded here: the kit's words for the reasons it
    knows ("graded by the hiring team's kit", "needs a CUDA device"), else the message itself."""
    key = next((key for start, key in UNGRADED.items() if message.startswith(start)), None)
    return tr(lang, key) if key else message


def translated_reason(lang: str, reason: str) -> str:
    """A report's `ungraded` reason (stored in English) in `lang`; an unknown one as it is."""
    key = next((key for key in UNGRADED.values() if STRINGS["en"][key] == reason), None)
    return tr(lang, key) if key else reason


def more_points(lang: str, points: str, reason: str) -> str:
    """`points` (already formatted) not graded here for `reason`, as a phrase: "5 more graded by
    the hiring team's kit", "9 more not graded here: needs a CUDA device"."""
    if reason == STRINGS["en"]["ungraded_full_kit"]:
        return tr(lang, "more_full_kit", points=points)
    return tr(lang, "more_elsewhere", points=points, reason=translated_reason(lang, reason))


def language(report: dict) -> str:
    """The report's language: its `language` field when the kit knows it, else English."""
    lang = report.get("language", "en")
    return lang if lang in LANGUAGES else "en"


def tr(lang: str, key: str, **values: object) -> str:
    """The string `key` in `lang`, with `values` filled in."""
    return STRINGS[lang][key].format(**values)


def part_title(lang: str, part_id: str, part: dict) -> str:
    """A part's title: the report's own in English, the kit's translation in Chinese."""
    if lang == "en" or part_id not in PARTS:
        return part["title"]
    return PARTS[part_id].titled(lang)


def part_asks(lang: str, part_id: str) -> str:
    """What a part asks, in one line; empty for a part the kit does not know."""
    return PARTS[part_id].asks(lang) if part_id in PARTS else ""
