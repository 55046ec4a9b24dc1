# ruff: noqa: RUF001 -- Chinese text takes full-width punctuation, not ASCII's.
"""The candidate-facing text of the reports and of the summary, in English and in Chinese.

`tr(lang, key, **values)` gives one string, formatted with `values`: the words of the pages and
of the summary (headings, statuses, the summary's sentences). What a check says (its message, its
counterexample's comments) and the grader's notes are written in English, into `report.json`, and
shown in Chinese through the catalog of `messages.py`. Both tables have the same keys and the same
placeholders (the kit's tests check it).
"""

from grader.parts import PARTS
from grader.ungraded import REASONS, reason_of

LANGUAGES = ("en", "zh")

STRINGS = {
    "en": {
        # statuses, of checks and of the engine check
        "passed": "passed",
        "failed": "failed",
        "error": "error",
        "skipped": "skipped",
        # punctuation between the kit's words and what follows them (and `list_separator`):
        # Chinese text takes the full-width marks, with no space beside them (`gap`: after a
        # sentence or a label)
        "colon": ": ",
        "comma": ", ",
        "open": " (",
        "close": ")",
        "gap": " ",
        # the page's and report.md's text
        "kicker": "PagedAttention interview kit: grade report",
        "title": "Grade report",
        "points": "points",
        "graded": (
            "Graded {started_at} in {seconds} s, profile {profile}, seed {seed}, on {device}."
        ),
        # the profiles' names (`--profile`), a grading without `--seed`, how the workers ran
        "profile_quick": "quick",
        "profile_full": "full",
        "no_seed": "none",
        "isolation_note": "{description}.",
        "graded_from": "Graded from {path}",
        "graded_from_folder": "Graded from {path}, the files in its folder {folder}",
        "kit_full": "Made by the hiring team's full kit.",
        "kit_candidate": (
            "Made by the candidate kit, which has no answer key: the checks that need one are "
            "left to the hiring team's kit."
        ),
        "seal_sealed": (
            "Sealed with the hiring team's key (id {key_id}): a drive keeps or merges the report "
            "only where that key verifies it unchanged."
        ),
        "seal_candidate": "Self-graded, unsealed: no drive keeps or merges it.",
        "seal_unisolated": (
            "Unsealed: its workers were not isolated, so no key was there to seal it; no drive "
            "keeps or merges it."
        ),
        "seal_no_key": "Unsealed: written without a seal key; no drive keeps or merges it.",
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
        "syntax_heading": "Syntax errors",
        "syntax_intro": (
            "Python cannot compile these files, so they never ran: each check that imports one "
            "failed on it, and its part says so without repeating the error."
        ),
        "syntax_error": "{file} does not compile, line {line}: {message}",
        "syntax_blamed": "{count} checks failed on it: {parts}.",
        "syntax_blamed_one": "{count} check failed on it: {parts}.",
        "syntax_engine": "The end-to-end engine check failed on it too.",
        "syntax_part": (
            "{count} checks failed because {file} does not compile (line {line}; shown at the top):"
        ),
        "syntax_part_one": (
            "{count} check failed because {file} does not compile (line {line}; shown at the top):"
        ),
        "syntax_see": "{file} does not compile (line {line}; shown at the top).",
        "total": "Total",
        "parts_heading": "Parts",
        "part": "Part",
        "asks": "What it asks",
        "score": "Score",
        "checks": "Checks",
        "tally": "{passed} of {total} checks passed",
        "tally_one": "{passed} of {total} check passed",
        "tally_skipped": "{tally}, {count} skipped",
        "not_graded": "not graded",
        "provisional": "provisional",
        "provisional_reason": "provisional: {reason}",
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
        "skipped_check_one": "{points} point, {reason}",
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
        "diagnosis": "Diagnosis",
        "diagnosis_syntax": "{file} does not compile",
        "diagnosis_not_implemented": "{part}: not implemented",
        "diagnosis_partly_implemented": "{part}: partly not implemented",
        "diagnosis_not_submitted": "{part}: its file is not submitted",
        "diagnosis_no_import": "{part}: its code does not import",
        "diagnosis_no_triton": "{part}: no Triton kernel is launched",
        "diagnosis_refused": "{part}: not run, the grader refuses its file (see the report)",
        "diagnosis_more": "and {count} more",
        "items_title": "Item analysis: {folder}",
        "items_link": "Item analysis: how each check did across this drive",
        "items_back": "Back to the leaderboard",
        "items_intro": (
            "Pass share is the share of graded submissions that passed the check. Discrimination "
            "is the point-biserial correlation between passing it and the score on the other "
            "checks: near 0 the check tells strong and weak submissions apart no better than "
            "chance, and below 0 stronger submissions fail it more often: suspect the check or "
            "the statement."
        ),
        "items_counted": (
            "Each check counts the graded submissions in which it ran, passed or failed; where it "
            "was skipped, could not run or is absent, the submission is left out."
        ),
        "items_none": "No graded report lists a check.",
        "items_check": "check",
        "items_part": "part",
        "items_severity": "severity",
        "items_submissions": "submissions",
        "items_passed": "passed",
        "items_pass_share": "pass share",
        "items_discrimination": "discrimination",
        "items_flag": "flag",
        "items_flag_all_passed": "all passed",
        "items_flag_all_failed": "all failed",
        "items_flag_negative": "negative discrimination",
        "severity_safety": "safety",
        "severity_contract": "contract",
        "severity_speed": "speed",
        "score_out_of_cuda": (
            "{score} of {max_score} points graded here; out of {total} with a CUDA device"
        ),
        "score_out_of_full_kit": (
            "{score} of {max_score} points graded here; out of {total} in the hiring team's kit"
        ),
        "score_out_of_cuda_full_kit": (
            "{score} of {max_score} points graded here; out of {total} in the hiring team's kit "
            "with a CUDA device"
        ),
        "score_out_of_elsewhere": (
            "{score} of {max_score} points graded here; out of {total} where every check runs"
        ),
        "standing": (
            "Standing among the drive's {submissions} graded submissions: percentile {percentile} "
            "in the total (median {median}); by part: {parts}"
        ),
        "standing_part": "{part} {percentile} (median {median})",
        "interviewer_heading": "For the interviewer",
        "interviewer_intro": (
            "Questions to ask the candidate: for each failed check, one that asks them to reason "
            "about the failure; for each part with full marks, one that probes depth. Each comes "
            "with what a good answer mentions. The candidate's kit does not have them."
        ),
        "interviewer_depth": "depth",
        "interviewer_answer": "A good answer mentions",
        "method_heading": "How this report was made",
        "safety_heading": "Safety failures",
        "safety_intro": (
            "Failed checks whose failure means the cache is corrupted or leaks: a block handed "
            "out twice or lost, a request served wrong rows, a wrong attention output. Each is "
            "first in its part below."
        ),
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
        "integration_details": "What it ran, in figures",
        "prefix_integration_heading": "End-to-end prefix-caching check (not scored)",
        "prefix_integration_intro": (
            "The same tiny transformer served prompts that share prefixes (a system prompt, "
            "few-shot examples, a multi-turn chat) over the submission's prefix cache, computing "
            "only the prompt tokens it said were not cached and reading the others' KV from its "
            "blocks. It earns no points: it shows whether the cached blocks hold the right KV, "
            "and how much prompt work they save."
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
        "simulation_link": (
            "The kit's own simulation, the same for every report, has a page of its own:"
        ),
        "back_to_report": "Back to the report",
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
        "more_failures_one": "({count} more check did not pass in this part; it is in the report.)",
        "see_counterexample": "Its counterexample, as Python that replays the failure:",
        "counterexample_in_report": (
            "Its counterexample, {count} lines of Python that replay the failure, is too long to "
            "show here."
        ),
        "run_in": (
            "Run it with the kit's Python ({python} in the kit's folder) in {folder}, the folder "
            "that holds the graded files, or paste it into that Python started there."
        ),
        "run_in_archive": (
            "Run it with the kit's Python ({python} in the kit's folder) in the folder {folder} "
            "of {path} unpacked, or paste it into that Python started there."
        ),
        "run_in_archive_top": (
            "Run it with the kit's Python ({python} in the kit's folder) in the folder you unpack "
            "{path} into, or paste it into that Python started there."
        ),
        "more_lines": "... {count} more lines in the report",
        "more_lines_one": "... {count} more line in the report",
        "where": "In the report: {path}#{anchor} (also report.md, under {title}).",
        "not_started": "Not implemented yet (a stub or a missing file): {parts}.",
        "all_passed": "Every graded check passed.",
        "grading": "Grading {submission} ({profile} profile)...",
        "grading_folder": "Taking the submission files from {folder}/ in it.",
        "interrupted": "Interrupted: the grading stopped; no report was written (an earlier one "
        "is left as it was).",
        # the progress lines while the checks run (grader/scoring/progress.py)
        "progress_running": "{done}/{total} checks: {tally}",
        "progress_done": "{total} checks: {tally}",
        "progress_done_one": "{total} check: {tally}",
        "progress_tally": "{passed} passed, {failed} failed",
        "progress_skipped": ", {count} skipped",
        "progress_errors": ", {count} grader errors",
        "progress_seconds": "{seconds} s",
        "progress_now": "running {name} ({seconds} s)",
        "progress_again": "{parts} again, with the kit's {file}: yours fails allocator checks",
        "progress_engine": "engine check (a tiny transformer served by your parts, not scored)...",
        "progress_prefix_engine": (
            "prefix-caching check (the tiny transformer served over your prefix cache, not "
            "scored)..."
        ),
        "provisional_note": "{part}: {note}",
        "integrity_count": "{count} integrity flags for a reviewer: see the report.",
        "integrity_count_one": "{count} integrity flag for a reviewer: see the report.",
        "integration_line": "End-to-end engine check (not scored): {status}. {message}",
        "prefix_integration_line": (
            "End-to-end prefix-caching check (not scored): {status}. {message}"
        ),
        "grader_failed": "The grader itself failed; the score may be incomplete:",
        "report_at": "Report: {path}  (also report.md, report.json)",
        "warning": "WARNING: {message}",
        # grade-all's lines (grader/drive/command.py, grader/drive/progress.py)
        "drive_grading": "Grading {count} submissions, {jobs} at a time ({profile} profile)...",
        "drive_finished": "[{done}/{total}] {name}: {result} ({seconds} s)",
        "drive_not_graded": "NOT GRADED ({failure}): {why}",
        "drive_status": (
            "{done} of {total} done, {running} under way, {elapsed} elapsed, {estimate}"
        ),
        "drive_estimating": "estimating the time left...",
        "drive_left": "about {time} left",
        "drive_overdue": "taking longer than estimated",
        "drive_leaderboard": "Leaderboard: {page}  (also leaderboard.csv)",
        "drive_some_failed": (
            "grade-all: {failed} of {total} submissions could not be graded ({names}): their rows "
            "say why; each one's log is {out}/<name>/grade.log."
        ),
        "drive_none_graded": (
            "grade-all: none of the {total} submissions could be graded ({names}), so no "
            "leaderboard was written (an earlier one stays as it was); each one's log is "
            "{out}/<name>/grade.log."
        ),
        "drive_interrupted": (
            "grade-all: interrupted; the gradings under way were stopped, no leaderboard written. "
            "The same command again grades the rest."
        ),
        # the leaderboard's page (grader/report/leaderboard.py; its CSV stays in English: data)
        "board_title": "Leaderboard: {folder}",
        "board_intro": (
            "{graded} of {total} submissions graded, {settings}, {when}. Integrity flags are for "
            "the reviewer and never change the score. The kernel ratio is the geometric mean of "
            "the kernel's time over the reference's (lower is faster). Each name links to its "
            "report; hover it for the entry it was graded from."
        ),
        "board_settings_seed": "{profile} profile, seed {seed}",
        "board_settings_default": "{profile} profile, the default examples",
        "board_shared": "Every graded submission:",
        "board_shared_notes": "{notes}.",
        "list_separator": "; ",
        "board_candidate": "candidate",
        "board_score": "score",
        "board_integrity": "integrity",
        "board_more_flags": "and {count} more in the report",
        "board_kernel_ratio": "kernel ratio",
        "board_time": "time",
        "board_note": "note",
        "board_similarity": "most similar",
        # the reviewer's notes on a row (grader/report/reviews.py), after its own note
        "board_review_note": "reviewer: {note}",
        "board_review_confirmed": "confirmed: {about} ({reason})",
        "board_review_dismissed": "dismissed: {reason}",
        "board_not_graded": "Not graded ({failure})",
        "board_took": "{seconds} s",
        "board_took_minutes": "{minutes} min {seconds} s",
        "board_ratio_not_graded": "n/a: not graded",
        "board_ratio_no_gpu": "n/a: no GPU",
        "board_ratio_not_timed": "n/a: not timed",
        "board_grader_failed": "the grader failed on part of it: {error}",
        "board_check_errors": "the grader could not run {count} of its checks: see the report",
        "board_provisional": "provisional ({parts}): checks skipped, see the report",
        "board_similar_heading": "Similar pairs",
        "board_similar_intro": (
            "Submissions whose code matches each other's, or a known implementation's (the "
            "answer key, nano-vllm, vLLM), with identifiers, literals, comments and layout "
            "(semicolons, parentheses, the order of independent assignments) set aside. Shown "
            "for a reviewer to judge; never part of a score. Each pair links to its side-by-side "
            "page. A file that runs code it decodes at run time is listed first: its code cannot "
            "be compared."
        ),
        "board_submission": "submission",
        "board_matches": "matches",
        "board_file": "file",
        "board_shares": "share of each",
        "board_fingerprints": "fingerprints",
        "board_no_similar": (
            "No pair of submissions, and no submission and known implementation, share code "
            "above the threshold."
        ),
        "board_obfuscated": "obfuscated: cannot be compared",
        "board_similar_failed": "The comparison failed, so no pair is shown: {error}",
        # a similar pair's page (grader/similarity/page.py)
        "pair_title": "Similar code: {left} / {right}",
        "pair_heading": "Similar code",
        "pair_intro": (
            "Shown for a reviewer to judge; it changes no score. Shares: the part of each side's "
            "own code (the stubs left out) found in the other side."
        ),
        "pair_left": "Left:",
        "pair_right": "Right:",
        "pair_file": (
            "{file}: {left}% of the left, {right}% of the right ({matched} shared fingerprints)"
        ),
        "pair_reference": (
            "{name}: {url}, {path} at commit {commit} (sha256 {sha256}). Its code is not shipped "
            "with the kit; matched lines:"
        ),
        "pair_reference_no_commit": (
            "{name}: {url}, {path} (sha256 {sha256}). Its code is not shipped with the kit; "
            "matched lines:"
        ),
        "pair_lines": "left {left_first}-{left_last}: reference {right_first}-{right_last}",
        # `python -m grader compare A B` (grader/report/compare.py), its terminal and its page
        "compare_heading_text": "Comparing two grade reports",
        "compare_title": "Grade reports compared",
        "compare_heading": "Two grade reports compared",
        "compare_provenance": (
            "{name}, graded {started_at}, {profile} profile, {seed}, on {device}, by {kit}"
        ),
        "compare_seed": "seed {seed}",
        "compare_no_seed": "default examples",
        "compare_kit_full": "the full kit",
        "compare_kit_candidate": "the candidate kit",
        "compare_kit_unrecorded": "an unrecorded kit",
        "compare_kit_warning": (
            "A was made by {a} and B by {b}: the candidate kit skips the checks that need the "
            "answer key (the timings against it, the scheduler's trace), so the scores differ by "
            "those checks as well as by the code."
        ),
        "compare_warning_label": "Warning:",
        "compare_same_files": "the same files (sha256)",
        "compare_files_differ": "files differ: {files}",
        "compare_file_differs": "{name} ({a} vs {b})",
        "compare_file_separator": ", ",
        "compare_absent": "absent",
        "compare_env_differs": "{name}: {a} vs {b}",
        "compare_env_device": "device",
        "compare_env_platform": "platform",
        "compare_same": "the same",
        "compare_submission": "submission: {files}",
        "compare_environment": "environment: {differences}",
        "compare_page_submission": "Submission: {files}.",
        "compare_page_environment": "Environment: {differences}.",
        "compare_part": "part",
        "compare_total": "total",
        "compare_change": "change",
        "compare_check": "check",
        "compare_report": "report",
        "compare_graded": "graded",
        "compare_benchmark": "benchmark",
        "compare_checks_changed": "Checks that changed: {count} of {total}",
        "compare_changed_heading": "Checks that changed ({count})",
        "compare_none_changed": "None: every check has the same status and points.",
        "compare_timings": "Timings (candidate time / reference time; lower is faster)",
        "compare_check_line": "{status}, {points} / {max_points}",
        "compare_check_message": "{line}: {message}",
        "compare_page": "Page: {path}",
    },
    "zh": {
        "passed": "通过",
        "failed": "未通过",
        "error": "出错",
        "skipped": "跳过",
        "colon": "：",
        "comma": "，",
        "open": "（",
        "close": "）",
        "gap": "",
        "kicker": "PagedAttention 面试套件：评分报告",
        "title": "评分报告",
        "points": "分",
        "graded": (
            "评分于 {started_at}，用时 {seconds} 秒，{profile}模式，"
            "随机种子：{seed}，设备：{device}。"
        ),
        "profile_quick": "快速",
        "profile_full": "完整",
        "no_seed": "未指定",
        "isolation_note": "{description}。",
        "graded_from": "评分对象：{path}",
        "graded_from_folder": "评分对象：{path}，取其中 {folder} 文件夹里的文件",
        "kit_full": "由招聘团队的完整套件生成。",
        "kit_candidate": (
            "由候选人套件生成，其中没有参考答案：需要参考答案的检查由招聘团队的完整套件来评。"
        ),
        "seal_sealed": (
            "已用招聘团队的密钥封印（密钥 id {key_id}）：只有该密钥验证其未被改动时，"
            "批量评分才会保留或合并这份报告。"
        ),
        "seal_candidate": "自行评分，未封印：批量评分不会保留或合并它。",
        "seal_unisolated": (
            "未封印：它的工作进程没有隔离，因此没有密钥为它封印；批量评分不会保留或合并它。"
        ),
        "seal_no_key": "未封印：写入时没有封印密钥；批量评分不会保留或合并它。",
        "intro": (
            "每个部分的分值固定，按权重分给其中的各项检查，在任何套件、任何机器上都一样。"
            "无法在这里运行的检查（需要招聘团队的完整套件或 CUDA 设备）保留各自的分值："
            "这些分数标在该部分得分旁边，不计入它的满分。"
            "每项未通过的检查都附有让提交出错的调用序列，写成可以直接运行、重现失败的 Python 代码。"
        ),
        "errors_heading": "评分器自身出错",
        "errors_intro": "得分可能因此少算了分数，原因不在提交本身。",
        "syntax_heading": "语法错误",
        "syntax_intro": (
            "Python 无法编译这些文件，因此它们从未运行：导入它们的每项检查都因此未通过，"
            "各部分只注明这一点，不再重复错误。"
        ),
        "syntax_error": "{file} 无法编译，第 {line} 行：{message}",
        "syntax_blamed": "有 {count} 项检查因此未通过：{parts}。",
        "syntax_blamed_one": "有 {count} 项检查因此未通过：{parts}。",
        "syntax_engine": "端到端引擎检查也因此未通过。",
        "syntax_part": "有 {count} 项检查因为 {file} 无法编译（第 {line} 行，见开头）而未通过：",
        "syntax_part_one": (
            "有 {count} 项检查因为 {file} 无法编译（第 {line} 行，见开头）而未通过："
        ),
        "syntax_see": "{file} 无法编译（第 {line} 行，见开头）。",
        "total": "总分",
        "parts_heading": "各部分",
        "part": "部分",
        "asks": "题目要求",
        "score": "得分",
        "checks": "检查",
        "tally": "{total} 项检查通过了 {passed} 项",
        "tally_one": "{total} 项检查通过了 {passed} 项",
        "tally_skipped": "{tally}，{count} 项跳过",
        "not_graded": "未评分",
        "provisional": "暂定分数",
        "provisional_reason": "暂定分数：{reason}",
        "counterexample": "反例：针对你的文件重放这次失败的 Python 代码：",
        "hypothesis": "Hypothesis 说明",
        "traceback": "调用栈（traceback）",
        "passed_list": "已通过：",
        "skipped_list": (
            "在此跳过，不计入该部分的满分（它们的分值保持不变，不分摊给已运行的检查）："
        ),
        "ungraded_full_kit": "由招聘团队的完整套件评分",
        "ungraded_cuda": "需要 CUDA 设备",
        "more_full_kit": "另有 {points} 分由招聘团队的完整套件评分",
        "more_elsewhere": "另有 {points} 分未在此评分：{reason}",
        "skipped_check": "{points} 分，{reason}",
        "skipped_check_one": "{points} 分，{reason}",
        "timings_heading": "计时",
        "timings_intro": (
            "每项计时都在同一输入、同一轮次中分别运行提交和套件的参考实现；比值是提交的耗时除以"
            "参考实现的耗时，1 表示与参考实现一样快，越小越快。每项计时对这个比值都设有上限。"
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
        "diagnosis": "诊断",
        "diagnosis_syntax": "{file} 无法编译",
        "diagnosis_not_implemented": "{part}：尚未实现",
        "diagnosis_partly_implemented": "{part}：部分尚未实现",
        "diagnosis_not_submitted": "{part}：没有提交它的文件",
        "diagnosis_no_import": "{part}：代码无法导入",
        "diagnosis_no_triton": "{part}：没有启动 Triton kernel",
        "diagnosis_refused": "{part}：未运行，评分器拒绝运行它的文件（见报告）",
        "diagnosis_more": "另有 {count} 项",
        "items_title": "逐项分析：{folder}",
        "items_link": "逐项分析：每项检查在本批提交中的表现",
        "items_back": "返回排行榜",
        "items_intro": (
            "通过率是通过该检查的已评分提交所占的比例。区分度是是否通过该检查与其余检查得分之间的"
            "点二列相关系数：接近 0 时，该检查区分强弱提交的能力并不比随机更好；低于 0 时，"
            "较强的提交反而更常未通过它：应怀疑该检查或题目的表述。"
        ),
        "items_counted": (
            "每项检查只计入它运行过（通过或未通过）的已评分提交；被跳过、无法运行或不存在时，"
            "该提交不计入。"
        ),
        "items_none": "已评分的报告中没有任何检查。",
        "items_check": "检查",
        "items_part": "部分",
        "items_severity": "严重程度",
        "items_submissions": "提交数",
        "items_passed": "通过数",
        "items_pass_share": "通过率",
        "items_discrimination": "区分度",
        "items_flag": "标记",
        "items_flag_all_passed": "全部通过",
        "items_flag_all_failed": "全部未通过",
        "items_flag_negative": "区分度为负",
        "severity_safety": "安全",
        "severity_contract": "契约",
        "severity_speed": "速度",
        "score_out_of_cuda": (
            "在此评分 {score} / {max_score} 分；在有 CUDA 设备的机器上满分为 {total}"
        ),
        "score_out_of_full_kit": (
            "在此评分 {score} / {max_score} 分；在招聘团队的完整套件中满分为 {total}"
        ),
        "score_out_of_cuda_full_kit": (
            "在此评分 {score} / {max_score} 分；在招聘团队的完整套件和 CUDA 设备上满分为 {total}"
        ),
        "score_out_of_elsewhere": (
            "在此评分 {score} / {max_score} 分；所有检查都能运行时满分为 {total}"
        ),
        "standing": (
            "在本批次 {submissions} 份已评分的提交中：总分百分位 {percentile}（中位数 {median}）；"
            "各部分：{parts}"
        ),
        "standing_part": "{part} {percentile}（中位数 {median}）",
        "interviewer_heading": "面试官参考",
        "interviewer_intro": (
            "可以向候选人提出的问题：每项未通过的检查一个，请候选人分析失败的原因；"
            "每个满分的部分一个，考察理解的深度。每个问题都附有好的回答应当提到的要点。"
            "候选人的套件中没有这些内容。"
        ),
        "interviewer_depth": "深入",
        "interviewer_answer": "好的回答会提到",
        "method_heading": "本报告是如何生成的",
        "safety_heading": "安全性失败",
        "safety_intro": (
            "这些未通过的检查意味着 cache 被破坏或泄漏：同一个块被分配两次或丢失、"
            "请求读到错误的行、注意力输出错误。每一项在下面所属部分中排在最前。"
        ),
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
        "integration_details": "运行情况与数据",
        "prefix_integration_heading": "端到端前缀缓存检查（不计分）",
        "prefix_integration_intro": (
            "用提交的前缀缓存驱动同一个很小的 transformer，处理一组共享前缀的 prompt（系统提示词、"
            "few-shot 示例、多轮对话）：只计算缓存说尚未缓存的 prompt token，其余 token 的 KV "
            "从缓存块中读取。这项检查不计分：它显示缓存块中的 KV 是否正确，以及省下了多少 prompt "
            "计算。"
        ),
        "scheduling_heading": "调度：每步生成的 token 数",
        "scheduling_intro": (
            "提交的调度器和静态批处理处理同一组 {requests} 个请求（{num_blocks} 个块，每块 "
            "{block_size} 个 token，最多同时运行 {max_num_seqs} 个序列）。静态批处理要等整批请求"
            "都结束才开始下一批；连续批处理在请求结束时，立即让等待的请求补上空出的批次槽位。"
            "仅供参考，不计分。"
        ),
        "scheduling_chart": "每个 decode 步生成的 token 数",
        "simulation_heading": "为什么分页和连续批处理更好",
        "simulation_intro": (
            "套件自带的模拟（make simulate），对每份提交都一样：同一组长尾分布的请求共用一个 "
            "KV cache 池，分别用静态批处理、基于连续预留的连续批处理（即 vLLM 论文中的基线）"
            "以及基于不同块大小分页的连续批处理来处理。"
        ),
        "simulation_link": "套件自带的模拟对每份报告都一样，单独成页：",
        "back_to_report": "返回报告",
        "step": "decode 步",
        "tokens_per_step": "每步 token 数",
        "your_scheduler": "本调度器",
        "static_batching": "静态批处理",
        "steps_taken": "{name}：{steps} 步，{tokens} 个 token，平均每步 {mean} 个 token",
        "not_drained": "本调度器没有处理完这组请求。",
        "ignored_heading": "被忽略的文件",
        "ignored_intro": "提交中不属于题目要求的文件；评分器没有读取它们。",
        "environment_heading": "运行环境",
        "submission_heading": "提交",
        "file": "文件",
        "summary_total": "总分",
        "first_look": "先看这里：",
        "first_failure": "{title}：检查 {name} {status}：",
        "more_failures": "（这一部分还有 {count} 项检查没有通过，都在报告里。）",
        "more_failures_one": "（这一部分还有 {count} 项检查没有通过，在报告里。）",
        "see_counterexample": "它的反例（重放这次失败的 Python 代码）：",
        "counterexample_in_report": (
            "它的反例（重放这次失败的 Python 代码，共 {count} 行）太长，这里不显示。"
        ),
        "run_in": (
            "在存放被评分文件的文件夹 {folder} 里用套件的 Python（套件文件夹里的 {python}）运行它，"
            "或在那里启动这个 Python 后粘贴进去。"
        ),
        "run_in_archive": (
            "把 {path} 解压后，在其中的文件夹 {folder} 里"
            "用套件的 Python（套件文件夹里的 {python}）运行它，或在那里启动这个 Python 后粘贴进去。"
        ),
        "run_in_archive_top": (
            "在你解压 {path} 的文件夹里用套件的 Python（套件文件夹里的 {python}）运行它，"
            "或在那里启动这个 Python 后粘贴进去。"
        ),
        "more_lines": "……报告中还有 {count} 行",
        "more_lines_one": "……报告中还有 {count} 行",
        "where": "报告中的位置：{path}#{anchor}（report.md 中在“{title}”下）。",
        "not_started": "尚未实现（仍是桩代码或缺少文件）：{parts}。",
        "all_passed": "所有评分的检查都通过了。",
        "grading": "正在评分 {submission}（{profile}模式）……",
        "grading_folder": "从其中的 {folder}/ 读取提交文件。",
        "interrupted": "已中断：评分已停止，没有写入报告（之前的报告保持原样）。",
        "progress_running": "{done}/{total} 项检查：{tally}",
        "progress_done": "{total} 项检查：{tally}",
        "progress_done_one": "{total} 项检查：{tally}",
        "progress_tally": "{passed} 项通过，{failed} 项未通过",
        "progress_skipped": "，{count} 项跳过",
        "progress_errors": "，{count} 项评分器出错",
        "progress_seconds": "{seconds} 秒",
        "progress_now": "正在运行 {name}（{seconds} 秒）",
        "progress_again": "用套件的 {file} 重新评分 {parts}：你的分配器没有通过 allocator 的检查",
        "progress_engine": "引擎检查（用你的各部分驱动一个很小的 transformer，不计分）……",
        "progress_prefix_engine": (
            "前缀缓存检查（用你的前缀缓存驱动那个很小的 transformer，不计分）……"
        ),
        "provisional_note": "{part}：{note}",
        "integrity_count": "有 {count} 个完整性标记需要人工查看：见报告。",
        "integrity_count_one": "有 {count} 个完整性标记需要人工查看：见报告。",
        "integration_line": "端到端引擎检查（不计分）：{status}。{message}",
        "prefix_integration_line": "端到端前缀缓存检查（不计分）：{status}。{message}",
        "grader_failed": "评分器自身出错，得分可能不完整：",
        "report_at": "报告：{path}（另有 report.md、report.json）",
        "warning": "警告：{message}",
        "drive_grading": "正在评分 {count} 份提交，每次 {jobs} 份（{profile}模式）……",
        "drive_finished": "[{done}/{total}] {name}：{result}（{seconds} 秒）",
        "drive_not_graded": "未评分（{failure}）：{why}",
        "drive_status": "已完成 {done}/{total}，进行中 {running}，已用 {elapsed}，{estimate}",
        "drive_estimating": "正在估算剩余时间……",
        "drive_left": "约剩 {time}",
        "drive_overdue": "比预计的久",
        "drive_leaderboard": "排行榜：{page}（另有 leaderboard.csv）",
        "drive_some_failed": (
            "grade-all：{total} 份提交中有 {failed} 份未能评分（{names}）：各自的行写明了原因；"
            "日志在 {out}/<name>/grade.log。"
        ),
        "drive_none_graded": (
            "grade-all：{total} 份提交都未能评分（{names}），因此没有写出排行榜"
            "（之前的排行榜保持不变）；日志在 {out}/<name>/grade.log。"
        ),
        "drive_interrupted": (
            "grade-all：已中断；进行中的评分已停止，没有写出排行榜。"
            "再次运行同一命令会评完其余的提交。"
        ),
        "board_title": "排行榜：{folder}",
        "board_intro": (
            "{total} 份提交中已评分 {graded} 份，{settings}，{when}。完整性标记供评审人员查看，"
            "从不影响得分。kernel 比值是 kernel 耗时与参考实现耗时之比的几何平均（越小越快）。"
            "每个名字都链接到它的报告；鼠标悬停在名字上，可以看到评分所用的原始条目。"
        ),
        "board_settings_seed": "{profile}模式，随机种子 {seed}",
        "board_settings_default": "{profile}模式，使用默认样例",
        "board_shared": "所有已评分的提交：",
        "board_shared_notes": "{notes}。",
        "list_separator": "；",
        "board_candidate": "候选人",
        "board_score": "得分",
        "board_integrity": "完整性标记",
        "board_more_flags": "另有 {count} 个，见报告",
        "board_kernel_ratio": "kernel 比值",
        "board_time": "用时",
        "board_note": "备注",
        "board_similarity": "最相似",
        "board_review_note": "审阅者：{note}",
        "board_review_confirmed": "已确认：{about}（{reason}）",
        "board_review_dismissed": "已排除：{reason}",
        "board_not_graded": "未评分（{failure}）",
        "board_took": "{seconds} 秒",
        "board_took_minutes": "{minutes} 分 {seconds} 秒",
        "board_ratio_not_graded": "无：未评分",
        "board_ratio_no_gpu": "无：没有 GPU",
        "board_ratio_not_timed": "无：未计时",
        "board_grader_failed": "评分器在其中一部分出错：{error}",
        "board_check_errors": "评分器无法运行其中 {count} 项检查：见报告",
        "board_provisional": "暂定分数（{parts}）：有检查被跳过，详见报告",
        "board_similar_heading": "相似的提交",
        "board_similar_intro": (
            "代码彼此相同、或与已知实现（参考答案、nano-vllm、vLLM）相同的提交，比较时不计标识符、"
            "字面量、注释和排版（分号、括号、互不依赖的赋值语句的先后顺序）。仅供评审人员判断，从不计入得分。每一对都链接到各自的并排对照页面。"
            "在运行时解码并执行代码的文件列在最前：它的代码无法比较。"
        ),
        "board_submission": "提交",
        "board_matches": "相似对象",
        "board_file": "文件",
        "board_shares": "各自的占比",
        "board_fingerprints": "共同指纹",
        "board_no_similar": "没有哪两份提交、也没有哪份提交与已知实现共有超过阈值的代码。",
        "board_obfuscated": "经过混淆：无法比较",
        "board_similar_failed": "比较失败，因此不显示任何相似的提交：{error}",
        "pair_title": "相似代码：{left} / {right}",
        "pair_heading": "相似代码",
        "pair_intro": (
            "仅供评审人员判断，不影响任何得分。占比：每一方自己的代码（不含发给候选人的桩代码）"
            "在另一方中出现的比例。"
        ),
        "pair_left": "左侧：",
        "pair_right": "右侧：",
        "pair_file": "{file}：占左侧的 {left}%，占右侧的 {right}%（{matched} 个共同指纹）",
        "pair_reference": (
            "{name}：{url}，{path}，提交 {commit}（sha256 {sha256}）。它的代码不随套件分发；"
            "匹配的行："
        ),
        "pair_reference_no_commit": (
            "{name}：{url}，{path}（sha256 {sha256}）。它的代码不随套件分发；匹配的行："
        ),
        "pair_lines": (
            "左侧第 {left_first}-{left_last} 行：参考实现第 {right_first}-{right_last} 行"
        ),
        "compare_heading_text": "对比两份评分报告",
        "compare_title": "评分报告对比",
        "compare_heading": "两份评分报告的对比",
        "compare_provenance": (
            "{name}，评分于 {started_at}，{profile}模式，{seed}，设备：{device}，由{kit}生成"
        ),
        "compare_seed": "随机种子 {seed}",
        "compare_no_seed": "默认样例",
        "compare_kit_full": "完整套件",
        "compare_kit_candidate": "候选人套件",
        "compare_kit_unrecorded": "未记录的套件",
        "compare_kit_warning": (
            "A 由{a}生成，B 由{b}生成：候选人套件会跳过需要参考答案的检查（与参考答案对比的计时、"
            "调度器的请求序列），所以两者得分的差异既来自代码，也来自这些检查。"
        ),
        "compare_warning_label": "警告：",
        "compare_same_files": "文件相同（按 sha256 比较）",
        "compare_files_differ": "文件不同，{files}",
        "compare_file_differs": "{name}（A 为 {a}，B 为 {b}）",
        "compare_file_separator": "；",
        "compare_absent": "缺失",
        "compare_env_differs": "{name} A 为 {a}，B 为 {b}",
        "compare_env_device": "设备",
        "compare_env_platform": "平台",
        "compare_same": "相同",
        "compare_submission": "提交：{files}",
        "compare_environment": "运行环境：{differences}",
        "compare_page_submission": "提交：{files}。",
        "compare_page_environment": "运行环境：{differences}。",
        "compare_part": "部分",
        "compare_total": "总分",
        "compare_change": "变化",
        "compare_check": "检查",
        "compare_report": "报告",
        "compare_graded": "评分情况",
        "compare_benchmark": "计时项",
        "compare_checks_changed": "有变化的检查：{total} 项中有 {count} 项",
        "compare_changed_heading": "有变化的检查（{count} 项）",
        "compare_none_changed": "无：每项检查的状态和分数都相同。",
        "compare_timings": "计时（提交耗时 / 参考实现耗时，越小越快）",
        "compare_check_line": "{status}，{points} / {max_points}",
        "compare_check_message": "{line}：{message}",
        "compare_page": "页面：{path}",
    },
}


def ungraded_id(item: dict) -> str | None:
    """The id of an `ungraded` item's reason (`grader/ungraded.py`): its `id`, or, in a report
    written before the ids, the id whose English is its `reason`; None for a reason the kit does
    not know."""
    reason_id, reason = item.get("id"), item.get("reason")
    if isinstance(reason_id, str) and reason_id in REASONS:
        return reason_id
    known = {english: key for key, (_, english) in REASONS.items()}
    return known.get(reason) if isinstance(reason, str) else None


def ungraded_reason(lang: str, message: str) -> str:
    """Why a check skipped with `message` is not graded here: the kit's words for the reasons it
    knows ("graded by the hiring team's kit", "needs a CUDA device"), else the message itself."""
    reason_id, _ = reason_of(message)
    return tr(lang, f"ungraded_{reason_id}") if reason_id else message


def more_points(lang: str, points: str, item: dict) -> str:
    """`points` (already formatted) not graded here for the reason of `item` (an `ungraded`
    item), as a phrase: "5 more graded by the hiring team's kit", "9 more not graded here: needs a
    CUDA device"; a reason the kit does not know, in its own words."""
    reason_id = ungraded_id(item)
    if reason_id == "full_kit":
        return tr(lang, "more_full_kit", points=points)
    reason = tr(lang, f"ungraded_{reason_id}") if reason_id else str(item.get("reason", ""))
    return tr(lang, "more_elsewhere", points=points, reason=reason)


def language(report: dict) -> str:
    """The report's language: its `language` field when the kit knows it, else English."""
    lang = report.get("language", "en")
    return lang if lang in LANGUAGES else "en"


def tr(lang: str, key: str, **values: object) -> str:
    """The string `key` in `lang`, with `values` filled in."""
    return STRINGS[lang][key].format(**values)


def profile_name(lang: str, profile: str) -> str:
    """A grading profile's name (`--profile`) in `lang`; one the kit does not know, as it is."""
    key = f"profile_{profile}"
    return tr(lang, key) if key in STRINGS[lang] else profile


def part_title(lang: str, part_id: str, part: dict) -> str:
    """A part's title: the report's own in English, the kit's translation in Chinese."""
    if lang == "en" or part_id not in PARTS:
        return part["title"]
    return PARTS[part_id].titled(lang)


def part_asks(lang: str, part_id: str) -> str:
    """What a part asks, in one line; empty for a part the kit does not know."""
    return PARTS[part_id].asks(lang) if part_id in PARTS else ""
