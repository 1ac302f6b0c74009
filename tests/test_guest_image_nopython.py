"""The guest images without python (issue 18) against the real Docker engine: what their recipes build.

The images are the shared ones bootstrap builds (cached by key, so an unchanged recipe builds nothing here); only
containers the tests create are removed.
"""

from __future__ import annotations

from collections.abc import Iterator

import docker
import pytest

from helpers.engine import run_once
from fixtures.guest_image import (
    BUSYBOX_IMAGE_TAG,
    BUSYBOX_RECIPE,
    DEFAULT_RECIPE,
    GUEST_IMAGES,
    LABEL_GUEST_KEY,
    NO_PYTHON_IMAGES,
    NOPYTHON_IMAGE_TAG,
    NOPYTHON_RECIPE,
    GuestImage,
    ensure_guest_image,
    guest_key,
    main,
)

# Every name a python interpreter goes by in Debian (the perl in perl-base is fine: it is no python).
NO_PYTHON_PROBE = ("for p in python3 python python3.11; do command -v $p && exit 1; done; "
                   "ls /usr/lib 2>/dev/null | grep -i python && exit 1; echo none")


@pytest.fixture(scope="module")
def client() -> Iterator[docker.DockerClient]:
    c = docker.from_env(timeout=120)
    yield c
    c.close()


@pytest.fixture(scope="module", params=NO_PYTHON_IMAGES)
def image(request: pytest.FixtureRequest) -> GuestImage:
    tag = str(request.param)
    return ensure_guest_image(tag=tag, recipe=GUEST_IMAGES[tag], progress=lambda _line: None)


def run_in(client: docker.DockerClient, image: str, script: str, user: str = "0") -> tuple[int, str]:
    return run_once(client, image, ["/bin/sh", "-c", script], user=user)


def test_recipes_have_their_own_keys() -> None:
    keys = {guest_key(recipe) for recipe in GUEST_IMAGES.values()}
    assert len(keys) == len(GUEST_IMAGES), "two images share a cache key"
    assert "python3" not in NOPYTHON_RECIPE.packages and "python3" in DEFAULT_RECIPE.packages
    assert BUSYBOX_RECIPE.variant == "extract" and BUSYBOX_RECIPE.packages == ("busybox-static",)
    assert set(NO_PYTHON_IMAGES) == {NOPYTHON_IMAGE_TAG, BUSYBOX_IMAGE_TAG}


@pytest.mark.docker
def test_image_is_current_and_labelled(client: docker.DockerClient, image: GuestImage) -> None:
    assert client.images.get(image.tag).labels[LABEL_GUEST_KEY] == image.key == guest_key(GUEST_IMAGES[image.tag])
    again = ensure_guest_image(tag=image.tag, recipe=GUEST_IMAGES[image.tag], progress=lambda _line: None)
    assert (again.built, again.imported) == (False, False), "an unchanged recipe was built again"
    assert main(["--image", image.tag, "--check"]) == 0


@pytest.mark.docker
def test_no_python_and_a_shell(client: docker.DockerClient, image: GuestImage) -> None:
    code, out = run_in(client, image.tag, NO_PYTHON_PROBE)
    assert (code, out) == (0, "none\n"), f"{image.tag} has a python: {out!r}"
    code, out = run_in(client, image.tag, "readlink -f /bin/sh; echo $0")
    assert code == 0 and out.splitlines()[-1] == "/bin/sh", out


@pytest.mark.docker
def test_users_dev_and_alt(client: docker.DockerClient, image: GuestImage) -> None:
    code, out = run_in(client, image.tag, "id dev; id alt; ls -dn /home/dev /tmp")
    assert code == 0, out
    lines = out.splitlines()
    assert lines[0].startswith("uid=1000(dev) gid=1000(dev)") and lines[1].startswith("uid=1001(alt) gid=1001(alt)")
    assert lines[2].split()[2:4] == ["1000", "1000"], f"/home/dev is not dev's: {lines[2]}"
    assert lines[3].split()[0] == "drwxrwxrwt", f"/tmp is not sticky and world-writable: {lines[3]}"
    # The developer writes its home and /tmp (the catalogue's markers live in /var/tmp).
    code, out = run_in(client, image.tag, "touch ~/w /tmp/w /var/tmp/w && id -un", user="1000")
    assert (code, out) == (0, "dev\n"), out


@pytest.mark.docker
def test_busybox_image_is_only_busybox(client: docker.DockerClient) -> None:
    image = ensure_guest_image(tag=BUSYBOX_IMAGE_TAG, recipe=BUSYBOX_RECIPE, progress=lambda _line: None)
    code, out = run_in(client, image.tag, "sh -c 'id dev'; readlink /bin/sh; ls /lib /lib64 /usr/lib 2>/dev/null "
                                          "| grep -c libc.so || true")
    assert code == 0, out
    assert out.splitlines() == ["uid=1000(dev) gid=1000(dev) groups=1000(dev)", "/bin/busybox", "0"], out
    assert not any(line.startswith("linuxrc") for line in run_in(client, image.tag, "ls /")[1].splitlines())
