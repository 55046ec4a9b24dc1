"""`resume.clear`: an earlier grading's files, its simulation page included, all go before a new
grading, which then finds its report folder empty (the grader refuses a folder holding other
files)."""

from pathlib import Path

from grader.__main__ import check_report_folder
from grader.drive.resume import REPORT_FILES, clear
from grader.report.render import SIMULATION_PAGE


def test_clearing_a_report_folder_leaves_it_empty_for_the_next_grading(tmp_path: Path) -> None:
    folder = tmp_path / "candidate"
    folder.mkdir()
    for name in (*REPORT_FILES, SIMULATION_PAGE):
        (folder / name).write_text("an earlier grading's\n")
    clear(folder)
    assert list(folder.iterdir()) == []
    check_report_folder(folder, tmp_path / "another_input")  # refuses a folder with files
