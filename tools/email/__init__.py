"""Email tools on the owner's mailbox (``tools.email.tools.email_tools``): IMAP with imapclient in a
worker thread, SMTP with aiosmtplib. Nothing here is imported unless ``tools.email.enabled``."""
