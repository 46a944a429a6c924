"""Files people already load: the HTML report (:mod:`.html`), JUnit XML (:mod:`.junit`)
and Chrome trace-event JSON for Perfetto (:mod:`.trace`).

Nothing is imported here: each module loads when its command needs it (jinja2 only for
the HTML page).
"""

__all__: list[str] = []
