"""How serious a check's failure is. Each check names one severity beside its points
(`@pytest.mark.severity("safety")`), the worst thing its failure can mean, from:

    safety    the cache is corrupted or leaks: a block handed out twice or lost, a request served
              another's rows or wrong ones, a wrong attention output
    contract  the contract is broken without corruption: a wrong error or type, a limit or an
              order not kept, a missed edge case
    speed     a timing: the work slower than the contract allows (a timed run whose result is
              wrong fails it too; the part's other checks say what is wrong)

A failure is labelled by what it harms: one that breaks a rule of its part (its `cause`,
`grader/checks/support/rules.py`) by what breaking that rule harms (an eviction order not kept is
contract, in a check that could find corruption), and a timing whose results, the code's own,
differ from the contract where no other check found it, contract (`grade.not_timed`). The reports
list a part's failed checks in this order, most serious first, and the leaderboard marks a
submission that fails a safety check. A rubric may weigh a severity's points
(`rubric.py`); by default each counts as its points.
"""

SEVERITIES = ("safety", "contract", "speed")  # most serious first
