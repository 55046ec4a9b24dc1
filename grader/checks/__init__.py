"""The grader's checks, one module per part; run by `grader.grade`, never by the kit's tests."""
