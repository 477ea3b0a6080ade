from . import policy


def role_flags(request):
    """What the signed-in user may see and do, for every template (memoryadmin.policy decides)."""
    return policy.abilities(getattr(request, "user", None))
