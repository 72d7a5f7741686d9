"""OpenFlow on the wire: the codec pazzd's proxy and the lab's switches and controllers use.

Everything works on the raw bytes of OpenFlow 1.3 messages (the proxy relays bytes, so it
edits bytes). The modules:

- `consts`: the OpenFlow constants used here, under OpenFlow's names.
- `framing`: the header, splitting a byte stream into messages, HELLO, OFPT_ERROR.
- `match`: OXM matches and their canonical form (the key of an entry).
- `actions`: instructions, actions and buckets: walking, checking, canonical form.
- `verify_action`: the Verify actions of ovs-patches/0003 and the proxy's rule ID.
- `messages`: the messages parsed or built (FlowMod, flow-stats, PACKET_IN/OUT, ...).
- `to_cpc`: conversion to the cpc model's FlowMod, FlowEntry and Group.
- `flow_monitor`: flow-monitor replies with the rule ID taken out (import it on its own).
- `message_types`: known types and fixed lengths per version, from os-ken's constants
  (import it on its own: os-ken's ofproto takes about 0.4 s to import).

The package itself offers the names of the first seven (`import ofwire as of`;
`of.parse_flow_mod(data)`). It uses cpc (for `to_cpc`) and os-ken, nothing else of ours.
"""

from ofwire.actions import *  # noqa: F403
from ofwire.consts import *  # noqa: F403
from ofwire.framing import *  # noqa: F403
from ofwire.match import *  # noqa: F403
from ofwire.messages import *  # noqa: F403
from ofwire.to_cpc import *  # noqa: F403
from ofwire.verify_action import *  # noqa: F403
