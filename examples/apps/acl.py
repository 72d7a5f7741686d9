"""The filter: the ACL lines of the rule file (cookie 0x20/0xff), drops at priority 1000."""

from examples.apps.common import RuleApp


class Acl(RuleApp):
    COOKIE, MASK = 0x20, 0xFF
