from django.apps import AppConfig


class AccountsConfig(AppConfig):
    name = "accounts"
    verbose_name = "Accounts"

    def ready(self) -> None:
        from django.db.models.signals import post_delete, post_save

        from accounts.keycache import accounts_changed
        from accounts.models import Agent, ApiKey, Team

        # Every write to what an API key authenticates as, whichever path it took (services, the admin,
        # cascades), so no process keeps trusting a key it verified before the write.
        for model in (ApiKey, Agent, Team):
            post_save.connect(accounts_changed, sender=model, dispatch_uid=f"keycache-save-{model.__name__}")
            post_delete.connect(accounts_changed, sender=model, dispatch_uid=f"keycache-delete-{model.__name__}")
