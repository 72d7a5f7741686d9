"""The router: the routes of the rule file (cookie 0x10/0xff) and the groups they use."""

from examples.apps.common import RuleApp


class Router(RuleApp):
    COOKIE, MASK = 0x10, 0xFF
    GROUPS = True
