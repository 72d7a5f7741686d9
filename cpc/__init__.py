"""cpc: the control-plane component.

It holds the controller's intended rules as BDDs and answers, for any header,
what the data plane should do with it: the path, the rules and the Verify tags.
It depends on no other PAZZ package.
"""
