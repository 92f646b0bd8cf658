import time
from tests.support.discord_rig import discord_rig
from worker.queue import questions_queue

def test_dbg(tmp_path) -> None:
    with discord_rig(tmp_path) as drig:
        fake = drig.fake
        got = []
        client = drig.bot.client
        orig = client.handler.on_message
        async def spy(message):
            got.append((message.id, message.content[:12], id(message)))
            await orig(message)
        client.handler.on_message = spy
        plain = fake.message_create("how does retry work?")
        edited = {**plain, "content": f"<@{fake.bot_id}> how does retry work?", "mentions": [fake.bot_user]}
        fake.dispatch("MESSAGE_UPDATE", edited)
        last = drig.mention("a real question")
        drig.queued()
        time.sleep(0.2)
        ids = questions_queue(drig.rig.redis).job_ids
        open("/tmp/dtest/frames.txt", "a").write(f"{len(ids)} {got} {client._connection._messages}\n")
