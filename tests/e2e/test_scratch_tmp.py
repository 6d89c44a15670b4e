import time
from tests.e2e.conftest import World


async def test_smoke(world: World) -> None:
    t0 = time.monotonic()
    gateway = await world.start()
    t1 = time.monotonic()
    tag = world.tag()
    world.send(501, f"hello #{tag}")
    reply = await world.wait_for_reply(tag)
    t2 = time.monotonic()
    print("start", t1 - t0, "reply", t2 - t1, reply)
    print(gateway.output)
    code = await gateway.terminate()
    print("exit", code, time.monotonic() - t2)
    print(gateway.tail(10))
