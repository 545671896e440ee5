"""Mail: the letters Locky sends and the background sender that hands them to the mailer."""
