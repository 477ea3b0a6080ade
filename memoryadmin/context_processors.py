from . import roles


def role_flags(request):
    user = getattr(request, "user", None)
    return {
        "user_role": roles.role_of(user),
        "user_is_admin": roles.is_admin(user),
        "user_reads_all": roles.can_read_all(user),
    }
