from tests.test_slack_commands import *
from tests.test_slack_commands import responses
def test_probe(rig):
    rig.command("refresh all", user="UADMIN"); rig.settle(); rig.work()
    print(rig.api.calls_to("chat.postEphemeral")[0].body["text"])
    rig.model.set_handler(lambda body: None)
    rig.mention("fails?"); rig.settle(); rig.work()
    rig.mention("a question waiting in the queue?")
    rig.command("status", user="UADMIN")
    print(responses(rig)[-1]["text"])
