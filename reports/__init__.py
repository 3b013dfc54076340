"""Reports rendered from a certification's ``results.json`` (the single source): a self-contained HTML page, a
JUnit XML file any CI shows natively, and a Markdown summary for a pull-request comment.

``streamcert certify`` writes them beside ``results.json``; ``streamcert report RESULTS.json [--out DIR]`` renders
them again (:func:`streamcert.reports.render.render_certification`). Everything runs in the harness's process,
after the runs, from files only: a report can be rendered on another machine from a copied results folder.
"""
